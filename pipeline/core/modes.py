"""The latency modes by name. Each stage keys its own trade for a mode by these names
(the voice's chunking in pipeline.voice.streaming_tts.LATENCY_MODES, the microphone's
look-ahead in pipeline.lipsync.model.MODES_MS); settings and the command line offer
them. Importing this loads nothing else, so a `--help` can list them cheaply."""

ULTRA, BALANCED, PREMIUM = "ultra", "balanced", "premium"
# Fastest first: the order the settings panel lists them in.
MODE_NAMES: tuple[str, ...] = (ULTRA, BALANCED, PREMIUM)
DEFAULT_MODE = BALANCED
# Offline nothing waits for the first audio, so files are made at the best quality.
OFFLINE_MODE = PREMIUM
