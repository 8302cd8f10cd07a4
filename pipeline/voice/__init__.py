"""The voice: streaming piper synthesis, the speaker that plays it, and the speech timeline (phonemes, visemes, cues, captions) it leaves."""
