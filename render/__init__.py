"""OpenGL rendering, avatar rigs, frame slots and the display clock. May import Qt, OpenGL and pipeline; never app."""
