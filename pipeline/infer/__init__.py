"""Model inference: onnxruntime sessions built one way for every model, on the execution provider asked for or with the reason why not."""
