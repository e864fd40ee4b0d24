// Talk mode on the paste page: typed text streams through a peer connection
// (POST /v1/audio/speech/webrtc) and the answer's audio track plays as each sentence is made.
// The `control` data channel carries the live session's JSON messages (docs/design.md). The state
// shown is what is true: "speaking" only while the track is audibly playing (a level meter on it),
// "listening for text" while it plays silence.
"use strict";

const TALK_ROUTE = "/v1/audio/speech/webrtc";
const SEND_EVERY_MS = 150;  // typed characters go out this often (fragments, not keystrokes)
const GATHER_MS = 2000;  // the offer carries its candidates: wait this long at most for them
const AUDIBLE = 0.01;  // RMS of the track above which it is speaking, not silence
const QUIET_MS = 300;  // quiet this long after sound: back to listening for text
const PHASES = {
  idle: "Not connected",
  connecting: "Connecting…",
  listening: "Connected: listening for text",
  speaking: "Speaking",
  finishing: "Finishing the last sentences…",
  done: "Done",
  cancelled: "Stopped",
  failed: "Failed",
};

class Talk {
  constructor(el) {
    this.el = el;
    this.state = { phase: "idle", sentences: 0, level: 0, heard: false, url: "", error: "" };
    this.pc = null;
    this.channel = null;
    this.sent = "";  // the text already sent: only what is typed after it is spoken
    this.lastSound = 0;
    this.timer = 0;
    this.meterTimer = 0;
  }

  set(phase, error = "") {
    this.state.phase = phase;
    this.state.error = error;
    this.el.state.textContent = PHASES[phase];
    this.el.error.textContent = error;
    const live = ["connecting", "listening", "speaking"].includes(phase);
    this.el.start.hidden = live || phase === "finishing";
    this.el.stop.hidden = !live;
    this.el.finish.hidden = !live;
    this.el.text.disabled = !["listening", "speaking"].includes(phase);
  }

  send(message) {
    if (this.channel && this.channel.readyState === "open") this.channel.send(JSON.stringify(message));
  }

  async start(voice, key) {
    this.state.sentences = 0;
    this.state.heard = false;
    this.sent = "";
    this.el.text.value = "";
    this.el.link.hidden = true;
    this.set("connecting");
    const pc = new RTCPeerConnection();
    this.pc = pc;
    this.channel = pc.createDataChannel("control");
    pc.addTransceiver("audio", { direction: "recvonly" });
    pc.ontrack = (event) => this.play(event.streams[0] || new MediaStream([event.track]));
    this.channel.onopen = () => this.send(voice ? { type: "start", voice } : { type: "start" });
    this.channel.onmessage = (event) => this.onEvent(JSON.parse(event.data));
    this.channel.onclose = () => this.ended();
    pc.onconnectionstatechange = () => {
      if (pc.connectionState === "failed") this.fail("The audio connection failed (are the server's UDP ports open?).");
    };
    try {
      await pc.setLocalDescription(await pc.createOffer());
      await gathered(pc);
      const headers = { "Content-Type": "application/sdp" };
      if (key) headers.Authorization = `Bearer ${key}`;
      const response = await fetch(TALK_ROUTE, { method: "POST", headers, body: pc.localDescription.sdp });
      if (!response.ok) {
        const body = await response.json().catch(() => ({}));
        const message = (body.error && body.error.message) || body.message || `The server answered ${response.status}.`;
        this.fail(response.status === 401 ? "This server wants an API key: enter it under API key." : message);
        return;
      }
      await pc.setRemoteDescription({ type: "answer", sdp: await response.text() });
    } catch (err) {
      this.fail("Could not connect: " + err);
    }
  }

  play(stream) {
    this.el.audio.srcObject = stream;  // Chromium feeds a remote stream to Web Audio only while an element plays it
    this.el.audio.play().catch(() => {});
    const context = new AudioContext();
    const analyser = context.createAnalyser();
    analyser.fftSize = 1024;
    context.createMediaStreamSource(stream).connect(analyser);
    const samples = new Float32Array(analyser.fftSize);
    this.meterTimer = setInterval(() => {
      analyser.getFloatTimeDomainData(samples);
      let sum = 0;
      for (const x of samples) sum += x * x;
      this.state.level = Math.sqrt(sum / samples.length);
      const now = performance.now();
      if (this.state.level > AUDIBLE) {
        this.lastSound = now;
        this.state.heard = true;
        if (this.state.phase === "listening") this.set("speaking");
      } else if (this.state.phase === "speaking" && now - this.lastSound > QUIET_MS) {
        this.set("listening");
      }
    }, 50);
    this.context = context;
  }

  onEvent(event) {
    if (event.type === "cast") {
      this.state.url = event.url;
      this.el.link.href = event.url;
      this.el.link.hidden = false;
      this.set("listening");
      this.el.text.focus();
    } else if (event.type === "sentence") {
      this.state.sentences += 1;
    } else if (event.type === "error") {
      this.el.error.textContent = event.message;
    } else if (event.type === "closed") {
      this.set(event.cancelled ? "cancelled" : event.code === 1000 ? "done" : "failed",
        event.code === 1000 ? "" : (event.error || `closed (${event.code})`));
      this.ended();  // the closing handshake: the server closes once this end has
    }
  }

  // The new text at the end of the box (edits before it are not spoken again); `flush` ends the
  // sentence in hand.
  typed(flush) {
    const value = this.el.text.value;
    if (!value.startsWith(this.sent)) {
      this.el.error.textContent = "Only new text at the end is spoken; earlier words are already said.";
      this.sent = value;
      return;
    }
    const fresh = value.slice(this.sent.length);
    if (fresh) this.send({ type: "text", text: fresh, flush });
    else if (flush) this.send({ type: "flush" });
    this.sent = value;
  }

  schedule() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.typed(false), SEND_EVERY_MS);
  }

  stop() {
    this.send({ type: "cancel" });
    this.el.audio.srcObject = null;  // silence now, whatever is in flight
  }

  finish() {
    this.typed(true);
    this.send({ type: "close" });
    this.set("finishing");
  }

  ended() {
    clearInterval(this.meterTimer);
    this.state.level = 0;  // the connection is gone: nothing plays any more
    this.el.audio.srcObject = null;
    if (this.context) this.context.close();
    this.context = null;
    if (["connecting", "listening", "speaking", "finishing"].includes(this.state.phase)) this.set("done");
    if (this.pc) this.pc.close();
  }

  fail(message) {
    this.set("failed", message);
    if (this.pc) this.pc.close();
  }
}

function gathered(pc) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => { if (pc.iceGatheringState === "complete") resolve(); };
    pc.addEventListener("icegatheringstatechange", done);
    setTimeout(resolve, GATHER_MS);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const $ = (id) => document.getElementById(id);
  const talk = new Talk({
    text: $("talk-text"), state: $("talk-state"), start: $("talk-start"), stop: $("talk-stop"),
    finish: $("talk-finish"), link: $("talk-link"), audio: $("talk-audio"), error: $("talk-error"),
  });
  window.streamttsTalk = talk;
  $("talk-start").addEventListener("click", () => talk.start($("voice").value, $("api-key").value.trim()));
  $("talk-stop").addEventListener("click", () => talk.stop());
  $("talk-finish").addEventListener("click", () => talk.finish());
  talk.el.text.addEventListener("input", () => talk.schedule());
  talk.el.text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      clearTimeout(talk.timer);
      talk.el.text.value += " ";
      talk.typed(true);
    }
  });
});
