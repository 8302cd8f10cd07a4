"""The latency modes: their names, the microphone's look-ahead in each, and what each
trades on either side, in words. Each stage keys its own trade for a mode by these names
(the voice's chunking in pipeline.voice.streaming_tts.LATENCY_MODES, the microphone
model's look-ahead MODES_MS); settings, the settings panel and the command line offer
them. Importing this loads nothing else, so a `--help` or the settings panel can list
and describe them cheaply (no onnxruntime, no piper)."""

ULTRA, BALANCED, PREMIUM = "ultra", "balanced", "premium"
# Fastest first: the order the settings panel lists them in.
MODE_NAMES: tuple[str, ...] = (ULTRA, BALANCED, PREMIUM)
DEFAULT_MODE = BALANCED
# Offline nothing waits for the first audio, so files are made at the best quality.
OFFLINE_MODE = PREMIUM

# How far ahead of an instant the microphone's lip-shape model may hear
# (pipeline.lipsync.model.LipShapeModel's lookahead_ms).
MODES_MS: dict[str, int] = {ULTRA: 10, BALANCED: 30, PREMIUM: 60}
# What each mode's chunking (pipeline.voice.streaming_tts.LATENCY_MODES) trades on the
# voice's side, one line each for the settings panel's details.
VOICE_TRADES: dict[str, str] = {
    ULTRA: "Fastest start: the smallest chunks and vocoder context (seams off by up to "
    "~2e-2, -35 dB) and a preview start; more CPU per second of speech.",
    BALANCED: "Starts almost at once: the first 70 ms are a preview (typically within "
    "-40 dB of exact, -25 dB at worst), the rest is exact; the first words are timed "
    "from a short look ahead.",
    PREMIUM: "Whole-sentence prosody, exactly as the voice reads it; the start waits for "
    "the whole sentence to be read (longer for long sentences).",
}
# What each mode trades on the microphone's side, for the settings panel. The ranking
# is measured on real speech (bench/results/lipsync_eval.json): the less the model may
# hear ahead, the more often it confuses shapes that look alike.
MIC_TRADES: dict[str, str] = {
    ULTRA: "Microphone: the mouth trails the voice the least (10 ms look-ahead); the "
    "least exact shapes.",
    BALANCED: "Microphone: 30 ms look-ahead; nearly premium's shapes.",
    PREMIUM: "Microphone: 60 ms look-ahead; the most exact shapes.",
}
