"""Audio, speech and lip-shape computation. Imports neither Qt nor OpenGL."""
