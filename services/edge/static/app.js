// The paste page: voices from /api/voices grouped by language (English first, preselected to fit
// the text's script), an honest size estimate, submit as JSON so that
// errors show inline (without JavaScript the form still posts and intake answers 303).
"use strict";

// Mirrors chunking's splitter closely enough for an estimate: sentences; the first chunk is the
// first clause (at most 30 characters), then every chunk is a whole sentence of at most 300
// (a longer one cut into about equal pieces).
// Intake plans the real count on submit.
const MAX_CHUNK_CHARS = 300;
const FIRST_CHUNK_CHARS = 80;
const FIRST_CLAUSE = [10, 24];  // characters of a first clause (about 0.6 to 1.5 s of speech)
const FIRST_WORDS_CHARS = 30;  // no clause end in range: the last word boundary within this
const MIN_CUT_CHARS = 12;
// Read-out speed of the voices, roughly: characters of text per second of audio.
const CHARS_PER_SECOND = 14;
const SENTENCE_END = /([.!?…]+["'”’)\]]*)(?=\s)|([。！？]+[」』）]*)/g;
const TITLES = new Set(("mr mrs ms dr prof sr jr st vs e.g i.e no fig approx jan feb mar apr jun jul aug " +
  "sep sept oct nov dec mt ft").split(" "));
// After these a stop ends the sentence before a word that opens one ("in the U.S. Then"); after a
// time before any capitalised word ("at 5 p.m. Bring").
const TIMES = new Set(["a.m", "p.m"]);
const ENDINGS = new Set(["etc", "inc", "ltd", "co"]);
const OPENERS = new Set(("i he she it we they you the a an this that these those there then but and so yet " +
  "now here in on at as if when while after before our my his her its their your what why how who where " +
  "however meanwhile later today tomorrow yesterday").split(" "));

function abbreviationContinues(line, dot, next) {  // "Dr. Smith", "U.S. Army", "5 p.m. sharp"
  if (line[dot] !== ".") return false;
  const before = line.slice(0, dot).trim().split(/\s+/).pop() || "";
  const word = before.replace(/^["'“‘(\[]+/, "").toLowerCase();
  if (TITLES.has(word) || (word.length === 1 && /\p{L}/u.test(word))) return true;
  if (!(TIMES.has(word) || ENDINGS.has(word) || /^(?:[a-z]\.)+[a-z]$/.test(word))) return false;
  const letters = (next.match(/^\p{L}+/u) || [""])[0];
  if (!letters || letters[0] === letters[0].toLowerCase()) return true;
  return !(TIMES.has(word) || OPENERS.has(letters.toLowerCase()));
}

function sentencesOf(text) {
  const out = [];
  for (const line of text.split(/\r?\n/)) {
    let start = 0;
    for (const m of line.matchAll(SENTENCE_END)) {
      const end = m.index + m[0].length;
      const next = line.slice(end).trimStart();
      const continues = next && next[0] !== next[0].toUpperCase();  // "Wait... what?"
      if (m[1] && (abbreviationContinues(line, m.index, next) || continues)) continue;
      out.push(line.slice(start, end));
      start = end;
    }
    out.push(line.slice(start));
  }
  return out.map((s) => s.replace(/\s+/g, " ").trim()).filter(Boolean);
}

function firstClauseEnd(s) {  // where the first chunk ends in the first sentence
  if (s.length <= FIRST_WORDS_CHARS) return s.length;
  const fits = (end, low, high) => {
    const head = s.slice(0, end).trim().length;
    return head >= low && head <= high && s.length - end >= MIN_CUT_CHARS;
  };
  for (const m of s.matchAll(/[,;:—–](?=\s)|\s[-–—]\s/g)) {
    const end = m.index + m[0].length;
    if (fits(end, ...FIRST_CLAUSE)) return end;
  }
  let space = 0;
  for (const m of s.matchAll(/\s/g)) if (fits(m.index + 1, MIN_CUT_CHARS, FIRST_WORDS_CHARS)) space = m.index + 1;
  return space || (s.length <= FIRST_CHUNK_CHARS ? s.length : FIRST_WORDS_CHARS);
}

function estimateChunks(text) {
  let chunks = 0;
  for (let s of sentencesOf(text)) {
    if (chunks === 0) {
      chunks = 1;
      s = s.slice(firstClauseEnd(s)).trim();
    }
    while (s) {
      const limit = MAX_CHUNK_CHARS;
      const pieces = Math.ceil(s.length / limit);
      const cut = Math.min(limit, Math.ceil(s.length / pieces) + MIN_CUT_CHARS);
      chunks += 1;
      s = s.length <= limit ? "" : s.slice(cut).trim();
    }
  }
  return chunks;
}

function minutes(seconds) {
  if (seconds < 60) return `${Math.max(1, Math.round(seconds))} s`;
  return `${(seconds / 60).toFixed(seconds < 600 ? 1 : 0)} min`;
}

function describe(text) {
  const chars = text.trim().length;
  if (!chars) return "Nothing pasted yet";
  const chunks = estimateChunks(text);
  const audio = minutes(chars / CHARS_PER_SECOND);
  const sentences = chunks === 1 ? "1 sentence" : `≈ ${chunks.toLocaleString()} sentences`;
  return `${chars.toLocaleString()} characters · ${sentences} · about ${audio} of audio`;
}

// Voice ids start with a language letter (castlog's voicemeta): a/b English first in the picker.
const ENGLISH = ["a", "b"];
// A text written in these scripts gets a voice of that language; anything else the default.
const SCRIPT_VOICES = [[/[\u3040-\u30ff]/u, "j"], [/\p{Script=Han}/u, "z"], [/\p{Script=Devanagari}/u, "h"]];
const SCRIPT_SAMPLE = 2000;  // characters looked at: enough to tell the script, cheap per key

function voiceRank(d) {
  const k = ENGLISH.indexOf(d.id[0]);
  return k >= 0 && d.lang ? k : (d.lang ? 2 : 3);
}

function orderVoices(details) {
  return details.slice().sort((x, y) => voiceRank(x) - voiceRank(y) ||
    x.language.localeCompare(y.language) || x.id.localeCompare(y.id));
}

function detailsOf(body) {
  const voices = Array.isArray(body) ? body : body.voices || [];
  const known = new Map((body.details || []).map((d) => [d.id, d]));
  return voices.map((id) => known.get(id) || { id, language: "Other", lang: "", gender: "", name: id });
}

// The voice language a text's script calls for ("j", "z", "h"), or null for Latin and the rest.
function scriptLanguage(text) {
  const sample = text.slice(0, SCRIPT_SAMPLE);
  const latin = (sample.match(/\p{Script=Latin}/gu) || []).length;
  for (const [pattern, prefix] of SCRIPT_VOICES) {
    const found = (sample.match(new RegExp(pattern.source, "gu")) || []).length;
    // kana anywhere means Japanese; Han or Devanagari must outweigh the Latin letters
    if (found && (prefix === "j" || found * 2 >= latin)) return prefix;
  }
  return null;
}

class VoicePicker {
  constructor(select) {
    this.select = select;
    this.details = [];
    this.fallback = "";
    this.chosenByUser = false;
    select.addEventListener("change", () => { this.chosenByUser = true; });
  }

  async load() {
    try {
      const response = await fetch("/api/voices", { headers: { Accept: "application/json" } });
      if (!response.ok) return;
      const body = await response.json();
      this.details = orderVoices(detailsOf(body));
      this.fallback = body.default || (this.details[0] && this.details[0].id) || "";
      this.render();
    } catch (err) {
      // keep "Default voice": intake picks its default when no voice is sent
    }
  }

  render() {
    const groups = new Map();
    for (const d of this.details) {
      if (!groups.has(d.language)) {
        const group = document.createElement("optgroup");
        group.label = d.language;
        groups.set(d.language, group);
      }
      const label = d.gender ? `${d.name} (${d.gender})` : d.name;
      groups.get(d.language).appendChild(new Option(label, d.id, d.id === this.fallback, d.id === this.fallback));
    }
    this.select.replaceChildren(...groups.values());
  }

  // Preselect a voice that reads the text's script, until the listener picks one.
  fit(text) {
    if (this.chosenByUser || !this.details.length) return;
    const prefix = scriptLanguage(text);
    const english = this.details.find((d) => ENGLISH.includes(d.id[0]) && d.lang);
    const fallback = this.details.find((d) => d.id === this.fallback);
    const latinFallback = fallback && ["j", "z", "h"].includes(fallback.id[0]) && english ? english : fallback;
    const wanted = (prefix && this.details.find((d) => d.id[0] === prefix)) || latinFallback;
    if (wanted) this.select.value = wanted.id;
  }
}

// A server with STREAMTTS_API_KEYS wants `Authorization: Bearer <key>` on submits; the key the
// user typed is kept in this browser (localStorage), never in the page or the URL.
const KEY_STORE = "streamtts.apiKey";

function storedKey() {
  try { return localStorage.getItem(KEY_STORE) || ""; } catch (err) { return ""; }
}

function storeKey(key) {
  try { key ? localStorage.setItem(KEY_STORE, key) : localStorage.removeItem(KEY_STORE); } catch (err) { /* private mode */ }
}

async function submit(form, button, errorBox, keyInput) {
  errorBox.textContent = "";
  button.disabled = true;
  button.textContent = "Submitting…";
  const data = new FormData(form);
  const payload = { text: data.get("text") || "" };
  if (data.get("voice")) payload.voice = data.get("voice");
  if ((data.get("title") || "").trim()) payload.title = data.get("title");
  const key = keyInput.value.trim();
  storeKey(key);
  const headers = { "Content-Type": "application/json", Accept: "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  try {
    const response = await fetch("/generate", { method: "POST", headers, body: JSON.stringify(payload) });
    const body = await response.json().catch(() => ({}));
    if (response.status === 401) {
      keyInput.closest("details").open = true;
      errorBox.textContent = key ? "The server refused this API key." : "This server wants an API key: enter it under API key.";
      return;
    }
    if (!response.ok) {
      const wait = response.headers.get("Retry-After");
      errorBox.textContent = (body.message || `The server answered ${response.status}.`) +
        (wait ? ` (retry in ${wait} s)` : "");
      return;
    }
    window.location.assign(body.url || `/c/${body.id}`);
  } catch (err) {
    errorBox.textContent = "Could not reach the server. Check your connection and try again.";
  } finally {
    button.disabled = false;
    button.textContent = "Generate";
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("cast-form");
  const text = document.getElementById("text");
  const estimate = document.getElementById("estimate");
  const button = document.getElementById("submit");
  const errorBox = document.getElementById("error");
  const keyInput = document.getElementById("api-key");
  keyInput.value = storedKey();
  if (keyInput.value) keyInput.closest("details").open = true;
  const picker = new VoicePicker(document.getElementById("voice"));
  picker.load().then(() => picker.fit(text.value));
  let pending = 0;
  text.addEventListener("input", () => {
    cancelAnimationFrame(pending);  // long texts: estimate once per frame, not per key
    pending = requestAnimationFrame(() => {
      estimate.textContent = describe(text.value);
      picker.fit(text.value);
    });
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!text.value.trim()) {
      errorBox.textContent = "Paste some text first.";
      return;
    }
    submit(form, button, errorBox, keyInput);
  });
});
