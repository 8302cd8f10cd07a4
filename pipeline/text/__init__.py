"""Text on its way to the voice: cleaning and splitting what the user typed, and normalising it for speech."""
