"""Frames on time: the display clock, frame slots, the producer that fills them, idle motion, and the presenter that gives any output the frame for each tick."""
