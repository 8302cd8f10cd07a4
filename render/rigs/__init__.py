"""Avatar rigs: what an avatar is made of (sprite layers, a photo and its mesh) and loading one from a path."""
