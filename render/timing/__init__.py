"""Frames on time: the display clock, frame slots, the producer that fills them, and idle motion."""
