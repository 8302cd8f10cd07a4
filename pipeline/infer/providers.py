"""The execution providers a setting or an argument may ask for, by name. Importing this
loads no onnxruntime, so the settings check a choice cheaply; sessions.py maps each to
onnxruntime's own."""

# "auto" is the fastest the machine has.
PROVIDERS: tuple[str, ...] = ("auto", "cpu", "cuda", "tensorrt")
