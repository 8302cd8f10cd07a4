"""What every stage shares: the typed records that flow between stages, visemes, the latency mode names, the media clock, sync metrics, the easing curve and paths."""
