"""Audio to mouth shapes: the lip-shape model's features and inference, and the live microphone stage."""
