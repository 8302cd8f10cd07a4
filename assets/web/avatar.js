// The browser-source page's side of render/outputs/browser_source.py (the wire format is
// described in render/outputs/browser_wire.py): paint each frame at the page's next animation frame, acknowledge the
// paint with the page's clock, answer clock probes at once, show captions, and reconnect
// with backoff while the app is away.
"use strict";
(() => {
  const HEADER_BYTES = 32;
  const MAGIC = 0x3246534c; // "LSF2" read as a little-endian u32
  const RAW = 0, PNG = 1;
  const RETRY_MIN_MS = 250;
  const RETRY_MAX_MS = 2000;
  // What the server may set on the caption (it checks the same keys).
  const CAPTION_STYLE_KEYS = ["color", "background", "font-family", "font-size",
                              "font-weight", "text-shadow"];

  const canvas = document.getElementById("avatar");
  const ctx = canvas.getContext("2d");
  const caption = document.getElementById("caption");
  // For tests and curious users: frames painted, the last one's number, media time and
  // paint time (performance.now()), frames replaced before they could be painted, and
  // frames that could not be decoded.
  const stats = window.lipsyncStats = {
    frames: 0, skipped: 0, undecodable: 0, connects: 0, connected: false,
    lastSeq: null, lastMediaTime: null, lastPaintTime: null, caption: "",
  };
  let socket = null;
  let retryMs = RETRY_MIN_MS;
  let pending = null;  // the newest frame ready to paint at the next animation frame
  let newestSeq = -1;  // the newest frame offered since connecting

  function send(message) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  }

  function paint() {
    const frame = pending;
    pending = null;
    if (canvas.width !== frame.width || canvas.height !== frame.height) {
      canvas.width = frame.width;  // which also clears it
      canvas.height = frame.height;
    } else {
      ctx.clearRect(0, 0, frame.width, frame.height);
    }
    // Outside the rectangle sent the frame is transparent.
    if (frame.image) ctx.putImageData(frame.image, frame.x, frame.y);
    if (frame.bitmap) {
      ctx.drawImage(frame.bitmap, frame.x, frame.y);
      frame.bitmap.close();
    }
    const t = performance.now();
    stats.frames += 1;
    stats.lastSeq = frame.seq;
    stats.lastMediaTime = frame.mediaTime;
    stats.lastPaintTime = t;
    send({painted: frame.seq, t: t, ready: frame.ready});
  }

  // A decoded frame: painted at the next animation frame unless a newer one comes first.
  function offer(frame) {
    frame.ready = performance.now();
    if (frame.seq <= newestSeq) {  // decoded after a newer one
      if (frame.bitmap) frame.bitmap.close();
      stats.skipped += 1;
      return;
    }
    newestSeq = frame.seq;
    if (pending) {
      if (pending.bitmap) pending.bitmap.close();
      stats.skipped += 1;
    } else {
      requestAnimationFrame(paint);
    }
    pending = frame;
  }

  function onFrame(buffer) {
    if (buffer.byteLength < HEADER_BYTES) return;
    const view = new DataView(buffer);
    if (view.getUint32(0, true) !== MAGIC) return;
    const frame = {
      seq: view.getUint32(4, true), mediaTime: view.getFloat64(8, true),
      width: view.getUint16(16, true), height: view.getUint16(18, true),
      x: view.getUint16(20, true), y: view.getUint16(22, true),
      image: null, bitmap: null,
    };
    const w = view.getUint16(24, true), h = view.getUint16(26, true);
    const encoding = view.getUint8(28);
    if (!w || !h) {
      offer(frame);  // all transparent
    } else if (encoding === RAW && buffer.byteLength === HEADER_BYTES + w * h * 4) {
      frame.image = new ImageData(new Uint8ClampedArray(buffer, HEADER_BYTES), w, h);
      offer(frame);
    } else if (encoding === PNG) {
      // Decoded off the page's main thread.
      createImageBitmap(new Blob([new Uint8Array(buffer, HEADER_BYTES)], {type: "image/png"}))
        .then((bitmap) => { frame.bitmap = bitmap; offer(frame); },
              () => { stats.undecodable += 1; });
    } else {
      stats.undecodable += 1;
    }
  }

  function onText(text) {
    let message;
    try { message = JSON.parse(text); } catch (e) { return; }
    if (typeof message.sync === "number") {
      send({sync: message.sync, t: performance.now()});
    } else if (message.type === "event" && message.event === "caption"
               && typeof message.text === "string") {
      // The app's event catalogue, in the JSON form the API sends too (docs/api.md).
      showCaption(message.text, message.style || {});
    }
  }

  function showCaption(text, style) {
    stats.caption = text;
    caption.textContent = text;
    caption.hidden = text === "";
    caption.className = style.position === "top" ? "top" : "bottom";
    for (const key of CAPTION_STYLE_KEYS) {
      if (typeof style[key] === "string") caption.style.setProperty(key, style[key]);
      else caption.style.removeProperty(key);
    }
  }

  function connect() {
    socket = new WebSocket(`ws://${location.host}/ws`);
    socket.binaryType = "arraybuffer";
    socket.onopen = () => {
      newestSeq = -1;  // a new server counts from 0
      stats.connects += 1;
      stats.connected = true;
      retryMs = RETRY_MIN_MS;
    };
    socket.onmessage = (event) => {
      if (typeof event.data === "string") onText(event.data);
      else onFrame(event.data);
    };
    // Also after a failed attempt (onerror is always followed by onclose): try again,
    // waiting twice as long each time up to RETRY_MAX_MS, so a restarting app is found
    // within 2 s of being back.
    socket.onclose = () => {
      stats.connected = false;
      socket = null;
      setTimeout(connect, retryMs);
      retryMs = Math.min(2 * retryMs, RETRY_MAX_MS);
    };
  }

  connect();
})();
