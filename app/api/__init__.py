"""The local API for bots, AI VTubers and stream tools (docs/api.md): one server, HTTP and
WebSocket on one port (server.py), streaming speech with its timing (speech_stream.py),
OpenAI's speech endpoint (openai_speech.py, audio_formats.py), control of the app and
its events (control.py), tokens (tokens.py) and the messages' shapes (protocol.py)."""
