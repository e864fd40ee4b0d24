// The player: reads the cast's log from seq_num 0 over SSE, decodes each audio record with Web
// Audio and schedules it on one timeline at its `o` offset, so sentences play back to back.
//
// The timeline: AudioContext time `anchorCtx` is cast time `anchorPos` (ms). Pausing, and
// waiting for audio that is not generated yet, both suspend the AudioContext: its clock stops,
// every scheduled sentence keeps its place, and playback resumes without a gap.
// Attempts: a `start` record drops the audio of sentences >= its resume_from (a new attempt
// rewrites them); the audio records that follow fill them in again.
//
// What the listener sees is what is true: the button shows Pause only while sound is playing,
// Waiting while the listener wants sound and the next sentence is not there yet (the line says
// which one), and Play otherwise; a click on Play always starts playback.
"use strict";

const LEAD_S = 0.08;  // (re)starting schedules this far ahead of the clock
const STALL_MARGIN_MS = 200;  // stop the clock when less audio than this is ready ahead
const RESUME_MARGIN_MS = 600;  // and start it again once this much is ready (or all the rest)
const DECODE_AHEAD_MS = 120000;  // decoded audio costs ~190 KB/s: decode 2 minutes ahead
const KEEP_BEHIND_MS = 30000;  // and forget decoded audio further behind than this
const CONTIGUOUS_MS = 5;  // sentences closer than this on the timeline are back to back
const TICK_MS = 50;
const KINDS = ["meta", "queue", "start", "audio", "eos", "error"];
// Read-out speed before any audio is known: ms of audio per character of text (14 chars/s).
const PRIOR_MS_PER_CHAR = 1000 / 14;

function bytesOf(base64) {
  const raw = atob(base64);
  const out = new Uint8Array(raw.length);
  for (let k = 0; k < raw.length; k += 1) out[k] = raw.charCodeAt(k);
  return out;
}

function clock(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${ss}` : `${m}:${ss}`;
}

class Player {
  constructor(id, ui) {
    this.id = id;
    this.ui = ui;
    this.ctx = new AudioContext();
    this.autoplay = this.ctx.state === "running";  // a new context runs only where autoplay is allowed
    this.chunks = new Map();  // sentence index -> {i, t, d, o, seq, bytes, buffer}
    this.title = "";
    this.voice = "";
    this.planned = 0;
    this.chars = 0;  // characters of the whole text (meta): the live total's plan
    this.status = "connecting";
    this.queuePos = null;  // its place in line while queued (a `queue` record), and when it starts (ms)
    this.startsAt = null;
    this.errorReason = null;
    this.done = false;
    this.cutShort = null;  // {of, ms}: the cast was cancelled after `planned` of `of` sentences
    this.lastSeq = -1;
    this.playing = this.autoplay;  // the listener wants sound
    this.engaged = false;  // sound has started, or the listener pressed play: waits show as such
    this.stalled = true;  // the audio at the playhead is not ready yet
    this.ended = false;
    this.anchorCtx = this.ctx.currentTime + LEAD_S;
    this.anchorPos = 0;
    this.generation = 0;
    this.sources = new Map();  // sentence index -> AudioBufferSourceNode of this generation
    this.scheduledIdx = new Set();  // sentence indexes scheduled in this generation
    this.scheduled = [];  // every scheduling, for tests: {i, start, duration, offset, generation}
    this.decodedKeys = new Set();  // "i:seq" decoded at least once
    this.decodes = 0;
    this.decoding = false;
    this.currentIndex = -1;
    this.stalls = 0;
    this.sync();
  }

  // -- the log ------------------------------------------------------------------------------

  onRecord(rec) {
    // A reconnect never repeats a record, but a log that Redis lost the tail of and that was
    // redone from there comes again from an earlier seq, opening with its new start: take that.
    if (rec.seq_num <= this.lastSeq && rec.kind !== "start") return;
    this.lastSeq = rec.seq_num;
    const h = rec.headers;
    if (rec.kind === "meta") {
      this.title = h.title;
      this.voice = h.voice;
      this.planned = h.sentences;
      this.chars = h.chars || 0;
      this.status = "queued";
    } else if (rec.kind === "queue") {
      // The worker's note: its place in line and about when its audio starts (from the record's stamp).
      this.status = "queued";
      this.queuePos = h.pos;
      this.startsAt = h.eta_ms === undefined || h.eta_ms < 0 ? null : rec.ts + h.eta_ms;
    } else if (rec.kind === "start") {
      this.queuePos = null;
      this.status = "generating";
      this.done = false;
      this.cutShort = null;
      this.errorReason = null;
      this.dropFrom(h.resume_from);
    } else if (rec.kind === "audio") {
      this.status = "generating";
      this.addChunk({ i: h.i, t: h.t, d: h.d, o: h.o, w: h.w || [], seq: rec.seq_num, bytes: bytesOf(rec.body), buffer: null });
    } else if (rec.kind === "eos") {
      // Cut short by a cancel: `sentences` of the text's plan were spoken, `audio_ms` long.
      this.cutShort = h.cancelled ? { of: this.planned, ms: h.audio_ms } : null;
      this.status = this.cutShort ? "cancelled" : "done";
      this.done = true;
      this.planned = h.sentences;
    } else if (rec.kind === "error") {
      this.status = "error";
      this.errorReason = h.reason;
    }
    this.ui.render(this, true);
    this.checkStall();
  }

  addChunk(chunk) {
    const old = this.chunks.get(chunk.i);
    if (old) this.stopSource(chunk.i);
    this.chunks.set(chunk.i, chunk);
    this.pump();
  }

  dropFrom(resumeFrom) {
    let cut = false;
    for (const i of [...this.chunks.keys()]) {
      if (i < resumeFrom) continue;
      cut = cut || this.scheduledIdx.has(i);
      this.chunks.delete(i);
    }
    if (cut) this.restartAt(Math.min(this.position(), this.knownEdge()));
  }

  ordered() {
    return [...this.chunks.values()].sort((a, b) => a.i - b.i);
  }

  // -- the timeline -------------------------------------------------------------------------

  position() {
    const pos = this.anchorPos + (this.ctx.currentTime - this.anchorCtx) * 1000;
    return Math.max(this.anchorPos, pos);
  }

  totalMs() {
    return this.ordered().reduce((end, c) => Math.max(end, c.o + c.d), 0);
  }

  // The whole cast's length while it is made: the audio so far, and the text still to come at
  // the speed measured on the text read so far (the plan's characters, at first a prior rate).
  estimatedTotalMs() {
    if (this.done) return this.totalMs();
    const chunks = this.ordered();
    const heardMs = chunks.reduce((sum, c) => sum + c.d, 0);
    const readChars = chunks.reduce((sum, c) => sum + c.t.length, 0);
    if (!this.chars) return chunks.length && this.planned ? heardMs / chunks.length * this.planned : 0;
    const rate = readChars ? heardMs / readChars : PRIOR_MS_PER_CHAR;
    return Math.max(this.totalMs(), heardMs + Math.max(0, this.chars - readChars) * rate);
  }

  // The first sentence that has not arrived (the playhead cannot pass one); -1 once all have.
  missingAhead() {
    const count = Math.max(this.planned, ...[...this.chunks.keys()].map((i) => i + 1), 0);
    for (let i = 0; i < count; i += 1) if (!this.chunks.has(i)) return i;
    return this.done ? -1 : count;
  }

  // What the button shows: "pause" while sound plays, "waiting" while the listener wants sound
  // that is not there yet, else "play" (also before sound first starts, unless play was pressed).
  look() {
    if (!this.playing || this.ended || this.status === "missing") return "play";
    if (!this.stalled && this.ctx.state === "running" && this.scheduledIdx.size) return "pause";
    if (this.status === "error" && this.missingAhead() >= 0) return "play";  // nothing more will come
    return this.engaged ? "waiting" : "play";
  }

  // The line under the bar while sound is wanted and not there: which sentence is awaited.
  waitingLine() {
    const queued = this.queueLine();
    if (queued) return queued;  // said before any play: how long until there is something to hear
    if (!this.playing || !this.stalled || this.ended || ["error", "missing"].includes(this.status)) return "";
    if (this.status === "queued" || this.status === "connecting") return "Queued: waiting for a free worker…";
    const next = this.missingAhead();
    if (next < 0 || (this.planned && next >= this.planned)) return "Loading audio…";
    return this.planned ? `Generating sentence ${next + 1} of ${this.planned}…` : `Generating sentence ${next + 1}…`;
  }

  // A cast waiting in line before its first audio: its place and the estimate, counted down.
  queueLine() {
    if (this.status !== "queued" || this.queuePos == null) return "";
    const place = this.queuePos === 1 ? "next in line" : `${ordinal(this.queuePos)} in line`;
    if (this.startsAt == null) return `Queued: ${place}…`;
    const s = Math.round((this.startsAt - Date.now()) / 1000);
    return s >= 1 ? `Queued: ${place}, starts in about ${s} s` : `Queued: ${place}, starts in a moment`;
  }

  knownEdge() {  // the end of the audio generated so far, back to back from the start
    let edge = 0;
    for (const c of this.ordered()) {
      if (c.o > edge + CONTIGUOUS_MS) break;
      edge = c.o + c.d;
    }
    return edge;
  }

  readyEdge(pos) {  // the end of the scheduled audio back to back from the playhead
    let edge = pos;
    for (const c of this.ordered()) {
      if (c.o + c.d <= pos) continue;
      if (c.o > edge + CONTIGUOUS_MS || !this.scheduledIdx.has(c.i)) break;
      edge = c.o + c.d;
    }
    return edge;
  }

  scheduleReady() {
    const now = this.ctx.currentTime;
    if (this.scheduledIdx.size === 0) {  // nothing placed yet: the anchor may move freely
      this.anchorCtx = Math.max(this.anchorCtx, now + LEAD_S);
    }
    const pos = this.position();
    for (const c of this.ordered()) {
      if (!c.buffer || this.scheduledIdx.has(c.i) || c.o + c.d <= pos + 1) continue;
      let when = this.anchorCtx + (c.o - this.anchorPos) / 1000;
      let offset = 0;
      if (when < this.anchorCtx) {  // the playhead was put inside this sentence
        offset = this.anchorCtx - when;
        when = this.anchorCtx;
      }
      if (when < now) {  // the clock ran past its start (a throttled tab): restart from it
        this.restartAt(c.o);
        return;
      }
      const source = this.ctx.createBufferSource();
      source.buffer = c.buffer;
      source.connect(this.ctx.destination);
      const duration = Math.max(0, Math.min(c.d / 1000, c.buffer.duration) - offset);
      source.start(when, offset, duration);
      this.sources.set(c.i, source);
      this.scheduledIdx.add(c.i);
      this.scheduled.push({ i: c.i, start: when, duration, offset, generation: this.generation });
    }
  }

  stopSource(i) {
    const source = this.sources.get(i);
    if (source) {
      try { source.stop(); } catch (err) { /* never started */ }
      source.disconnect();
      this.sources.delete(i);
    }
    this.scheduledIdx.delete(i);
  }

  restartAt(ms) {
    for (const i of [...this.sources.keys()]) this.stopSource(i);
    this.scheduledIdx.clear();
    this.generation += 1;
    this.anchorPos = Math.max(0, ms);
    this.anchorCtx = this.ctx.currentTime + LEAD_S;
    this.ended = false;
    this.stalled = true;
    this.scheduleReady();
    this.pump();
    this.checkStall();
  }

  checkStall() {
    const pos = this.position();
    const edge = this.readyEdge(pos);
    const final = this.done || this.status === "error";  // no more audio will come
    const end = this.done ? this.totalMs() : this.knownEdge();
    const allReady = final && edge >= end - CONTIGUOUS_MS;
    if (final && this.chunks.size && pos >= end - 1) {
      this.ended = true;
      this.playing = false;
    }
    if (allReady || edge - pos >= RESUME_MARGIN_MS) {
      this.stalled = false;
    } else if (edge - pos < STALL_MARGIN_MS && !this.stalled) {
      this.stalled = true;
      if (this.playing && this.scheduledIdx.size) this.stalls += 1;  // waited at the tail
    }
    this.sync();
  }

  sync() {
    const run = this.playing && !this.stalled;
    if (run && this.ctx.state === "suspended") this.ctx.resume();
    if (!run && this.ctx.state === "running") this.ctx.suspend();
    if (run && this.ctx.state === "running" && this.scheduledIdx.size) this.engaged = true;
  }

  // -- decoding: in order, one at a time, only near the playhead ------------------------------

  pump() {
    if (this.decoding) return;
    const pos = this.position();
    const next = this.ordered().find((c) => !c.buffer && c.o + c.d > pos - 1 && c.o < pos + DECODE_AHEAD_MS);
    if (!next) return;
    this.decoding = true;
    this.ctx.decodeAudioData(next.bytes.slice().buffer)  // a copy: decoding detaches it
      .catch(() => {  // a broken chunk plays as silence of its length, so the rest still follows
        this.ui.notice(`Sentence ${next.i + 1} could not be decoded; it is skipped.`);
        return this.ctx.createBuffer(1, Math.max(1, Math.round(next.d / 1000 * this.ctx.sampleRate)), this.ctx.sampleRate);
      })
      .then((buffer) => {
        this.decodes += 1;
        if (this.chunks.get(next.i) !== next) return;  // replaced by a new attempt meanwhile
        next.buffer = buffer;
        this.decodedKeys.add(`${next.i}:${next.seq}`);
        this.scheduleReady();
        this.checkStall();
      })
      .finally(() => {
        this.decoding = false;
        this.pump();
      });
  }

  evict() {
    const pos = this.position();
    for (const c of this.chunks.values()) {
      if (c.buffer && c.o + c.d < pos - KEEP_BEHIND_MS && !this.sources.has(c.i)) c.buffer = null;
    }
  }

  tick() {
    this.checkStall();
    this.evict();
    this.pump();
  }

  // -- controls -----------------------------------------------------------------------------

  // A click: Play starts playback (in the click's user gesture, so any autoplay policy lets the
  // AudioContext run); Pause and Waiting stop wanting sound.
  toggle() {
    if (this.look() === "play") this.play();
    else this.pause();
  }

  play() {
    this.playing = true;
    this.engaged = true;
    if (this.ctx.state === "suspended") this.ctx.resume();
    if (this.ended) this.restartAt(0);
    else this.checkStall();
    this.ui.render(this, false);
  }

  pause() {
    this.playing = false;
    this.checkStall();
    this.ui.render(this, false);
  }

  seek(ms) {
    const edge = this.knownEdge();
    this.restartAt(Math.max(0, Math.min(ms, edge)));
    this.ui.render(this, false);
  }

  step(delta) {
    const list = this.ordered();
    if (!list.length) return;
    const at = Math.max(0, this.currentIndex);
    const target = list.find((c) => c.i === at + delta) || list[Math.max(0, Math.min(list.length - 1, at + delta))];
    this.seek(target.o);
  }

  updateCurrent() {
    const pos = this.position();
    const hit = this.ordered().find((c) => c.o <= pos && pos < c.o + c.d);
    this.currentIndex = hit ? hit.i : (this.ended ? this.currentIndex : -1);
    return pos;
  }

  testState() {
    const playable = this.ordered();
    return {
      status: this.status,
      done: this.done,
      progress: document.getElementById("progress").textContent,
      playing: this.playing,
      stalled: this.stalled,
      stalls: this.stalls,
      ended: this.ended,
      look: this.look(),
      waitingLine: this.waitingLine(),
      estimatedTotal: this.estimatedTotalMs(),
      button: document.getElementById("play").getAttribute("aria-label"),
      line: document.getElementById("waiting").textContent,
      contextState: this.ctx.state,
      position: this.position(),
      currentIndex: this.currentIndex,
      chunks: playable.length,
      seqs: playable.map((c) => c.seq),
      decoded: playable.filter((c) => this.decodedKeys.has(`${c.i}:${c.seq}`)).length,
      decodes: this.decodes,
      generation: this.generation,
      scheduled: this.scheduled.filter((s) => s.generation === this.generation),
      allScheduled: this.scheduled.slice(),
      captions: [...document.querySelectorAll("#captions li.known")].map((li) => Number(li.dataset.i)),
    };
  }
}

// "3 of 7 sentences" while made; "3 of 7 sentences, 12.4 s" for a cast cut short (a live cast
// has no plan: "3 sentences, 12.4 s").
function progress(player) {
  const cut = player.cutShort;
  if (!cut) return player.planned ? `${player.chunks.size} of ${player.planned} sentences` : "";
  const of = cut.of > player.planned ? ` of ${cut.of}` : "";
  const noun = player.planned === 1 && !of ? "sentence" : "sentences";
  return `${player.planned}${of} ${noun}, ${(cut.ms / 1000).toFixed(1)} s`;
}

class View {
  constructor(id) {
    this.id = id;
    this.el = (name) => document.getElementById(name);
    this.items = [];
    this.shownIndex = -1;
    this.scale = 1;
  }

  notice(text) {
    this.el("notice").textContent = text;
  }

  render(player, structural) {
    const s = player.status;
    const pill = this.el("status");
    pill.dataset.status = s;
    pill.textContent = s === "missing" ? "not found" : s;
    if (player.title) {
      this.el("cast-title").textContent = player.title;
      document.title = `${player.title} · StreamTTS`;
    }
    this.el("voice").textContent = player.voice ? `voice ${player.voice}` : "";
    this.el("progress").textContent = progress(player);
    this.renderButton(player);
    const download = this.el("download");
    if (player.done && download.hidden) {
      download.href = `/api/casts/${this.id}/audio.mp3`;
      download.download = `${(player.title || this.id).replace(/[\\/:*?"<>|]+/g, " ").trim().slice(0, 80)}.mp3`;
      download.hidden = false;
    }
    if (s === "error") {
      const reason = player.errorReason || "the worker gave no reason";
      this.notice(`Generation failed: ${reason}. Submit the same text again to retry.`);
    }
    if (structural) this.renderCaptions(player);
  }

  renderButton(player) {
    const look = player.look();
    const play = this.el("play");
    if (play.dataset.look === look) return;
    play.dataset.look = look;
    play.setAttribute("aria-pressed", String(look !== "play"));
    play.setAttribute("aria-label", { play: "Play", pause: "Pause", waiting: "Waiting for audio (press to pause)" }[look]);
  }

  // No such cast: no controls at all, only the title and what to do.
  renderMissing() {
    for (const name of ["play", "bar", "times", "actions", "captions", "keys", "waiting"]) this.el(name).hidden = true;
    this.el("cast-title").textContent = "No such cast";
    this.el("status").textContent = "not found";
    this.el("status").dataset.status = "error";
    this.notice("Check the link, or paste the text again on the start page.");
  }

  renderCaptions(player) {
    const list = this.el("captions");
    const count = Math.max(player.planned, ...[...player.chunks.keys()].map((i) => i + 1), 0);
    while (this.items.length < count) {
      const li = document.createElement("li");
      li.dataset.i = String(this.items.length);
      li.addEventListener("click", () => {
        const c = player.chunks.get(Number(li.dataset.i));
        if (c) player.seek(c.o);
      });
      list.appendChild(li);
      this.items.push(li);
    }
    this.items.forEach((li, i) => {
      const c = player.chunks.get(i);
      if (c && !li.classList.contains("known")) {
        li.textContent = c.t;
        li.className = "known";
      } else if (c && li.textContent !== c.t) {
        li.textContent = c.t;
      } else if (!c && !li.classList.contains("pending")) {
        li.className = "pending";
        li.innerHTML = "<span></span>";
        li.firstChild.style.setProperty("--w", `${55 + ((i * 37) % 40)}%`);
      }
    });
  }

  frame(player) {
    const pos = player.updateCurrent();
    const known = player.knownEdge();
    const total = player.estimatedTotalMs();
    const scale = Math.max(total, known, 1);
    this.scale = scale;  // what a click on the bar means
    this.el("bar-generated").style.width = `${Math.min(100, known / scale * 100)}%`;
    this.el("bar-played").style.width = `${Math.min(100, pos / scale * 100)}%`;
    this.el("time-played").textContent = clock(pos);
    this.el("time-total").textContent = total ? (player.done ? clock(total) : `~${clock(total)}`) : "–:–";
    if (player.currentIndex !== this.shownIndex) {
      this.items.forEach((li, i) => {
        li.classList.toggle("current", i === player.currentIndex);
        li.classList.toggle("played", player.currentIndex >= 0 && i < player.currentIndex);
      });
      const li = this.items[player.currentIndex];
      if (li) {
        const list = this.el("captions");
        if (li.offsetTop < list.scrollTop || li.offsetTop + li.offsetHeight > list.scrollTop + list.clientHeight) {
          list.scrollTo({ top: li.offsetTop - list.clientHeight / 3, behavior: "smooth" });
        }
      }
      this.shownIndex = player.currentIndex;
    }
    highlightWord(this.items[player.currentIndex], player.chunks.get(player.currentIndex), pos);
    this.renderButton(player);
    const line = player.waitingLine();
    if (this.el("waiting").textContent !== line) this.el("waiting").textContent = line;
  }
}

// -- word timings: the word being spoken, in the current sentence -----------------------------

const ordinal = (n) => {
  const tens = n % 100, ones = n % 10;
  const suffix = tens >= 11 && tens <= 13 ? "th" : ({ 1: "st", 2: "nd", 3: "rd" }[ones] || "th");
  return `${n}${suffix}`;
};

const plainWord = (s) => s.toLowerCase().replace(/[^\p{L}\p{N}]/gu, "");

function wordSpans(li, chunk) {
  // The sentence's words as spans, each matched to its timed word (the G2P's words are the
  // text's, or a reading of it: "1999" is "nineteen ninety-nine" and keeps no highlight).
  if (li.dataset.words === String(chunk.i)) return li.wordSpans;
  li.textContent = "";
  const spans = [];
  let next = 0;
  for (const part of chunk.t.split(/(\s+)/)) {
    if (!part.trim()) { li.append(part); continue; }
    const span = document.createElement("span");
    span.className = "word";
    span.textContent = part;
    li.append(span);
    const at = chunk.w.findIndex((w, k) => k >= next && plainWord(w[0]) === plainWord(part));
    if (at >= 0 && at < next + 3) { spans[at] = span; next = at + 1; }
  }
  li.dataset.words = String(chunk.i);
  li.wordSpans = spans;
  return spans;
}

function highlightWord(li, chunk, pos) {
  const shown = document.querySelector("#captions .word.speaking");
  if (!li || !chunk || !chunk.w.length) { if (shown) shown.classList.remove("speaking"); return; }
  const at = pos - chunk.o;
  const k = chunk.w.findIndex((w) => w[1] <= at && at < w[2]);
  const span = k >= 0 ? wordSpans(li, chunk)[k] : null;
  if (span === shown) return;
  if (shown) shown.classList.remove("speaking");
  if (span) span.classList.add("speaking");
}

function copyLink(button, url) {
  const done = () => {
    button.textContent = "Link copied ✓";
    setTimeout(() => { button.textContent = "Copy link"; }, 1600);
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(url).then(done, () => window.prompt("Copy this link:", url));
  } else {
    window.prompt("Copy this link:", url);
  }
}

async function start() {
  const id = decodeURIComponent(location.pathname.split("/").pop() || "");
  const view = new View(id);
  const player = new Player(id, view);
  window.streamttsPlayer = {
    get state() { return player.testState(); },
    toggle: () => player.toggle(),
    seek: (ms) => player.seek(ms),
  };
  const state = await fetch(`/api/casts/${encodeURIComponent(id)}`).catch(() => null);
  if (state && state.status === 404) {
    player.status = "missing";
    player.playing = false;
    player.sync();
    view.renderMissing();
    return;
  }
  if (!player.autoplay) view.notice("Press play (or Space) to listen.");
  const events = new EventSource(`/api/casts/${encodeURIComponent(id)}/events?seq_num=0`);
  for (const kind of KINDS) {
    events.addEventListener(kind, (ev) => {
      player.onRecord(JSON.parse(ev.data));
      if (kind === "eos") events.close();  // the log is complete: nothing more will come
    });
  }
  let lost = false;
  events.onopen = () => {
    if (lost) view.notice("");
    lost = false;
  };
  events.onerror = () => {
    if (player.done || player.status === "error") return;
    lost = true;
    view.notice(events.readyState === EventSource.CLOSED
      ? "The connection closed. Reload the page to continue."
      : "Connection lost; reconnecting…");
  };
  view.el("play").addEventListener("click", () => {
    view.notice("");
    player.toggle();
  });
  view.el("copy").addEventListener("click", (ev) => copyLink(ev.currentTarget, `${location.origin}/c/${id}`));
  view.el("bar").addEventListener("click", (ev) => {
    const bar = ev.currentTarget.getBoundingClientRect();
    player.seek((ev.clientX - bar.left) / bar.width * view.scale);
  });
  document.addEventListener("keydown", (ev) => {
    const tag = ev.target.tagName;
    if (["INPUT", "TEXTAREA", "SELECT", "BUTTON", "A"].includes(tag) || ev.metaKey || ev.ctrlKey || ev.altKey) return;
    if (ev.code === "Space") {
      ev.preventDefault();
      view.notice("");
      player.toggle();
    } else if (ev.code === "ArrowRight") {
      player.step(1);
    } else if (ev.code === "ArrowLeft") {
      player.step(-1);
    }
  });
  setInterval(() => player.tick(), TICK_MS);
  const loop = () => {
    view.frame(player);
    requestAnimationFrame(loop);
  };
  requestAnimationFrame(loop);
}

document.addEventListener("DOMContentLoaded", start);
