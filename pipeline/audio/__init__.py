"""Sound in and out through PortAudio: devices, the microphone, the output whose DAC is the media clock, and resampling."""
