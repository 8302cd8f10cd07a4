"""Audio to mouth shapes: the lip-shape model's features and inference, the live microphone
stage, transcript-assisted cues for recordings (forced_align.py) and the cue files
animators load (cue_formats.py)."""
