"""What every stage shares: the typed records that flow between stages, visemes, the media clock, sync metrics and paths."""
