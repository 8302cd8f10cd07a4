"""GPU producers that hand frames to OpenGL through CUDA-GL interop (cuda-python)."""
