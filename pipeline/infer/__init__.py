"""Model inference: onnxruntime sessions built one way for every model, on the execution
provider asked for or with the reason why not (sessions.py; the providers by name,
for settings, in providers.py); the voice's stages as engines
of fixed shapes, captured as CUDA graphs on a GPU (engine.py) after the graph rewrites that
put every node on the device (static_graph.py)."""
