"""OpenGL drawing: the sprite and photo renderers and an offscreen context."""
