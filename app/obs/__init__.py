"""OBS Studio from the outside: `lipsync-studio obs setup` and the settings panel's "Add to
OBS" button configure a running OBS through obs-websocket 5 (obsws-python).

- `connection.py`: ObsConnection, the connection (one-line errors, reconnects with
  bounded backoff and runs an operation again from the start).
- `link.py`: ObsLink, what Lipsync Studio sets up in OBS through it: the avatar capture,
  the chroma key, the mic's sync offset, caption text.
- `pusher.py`: ObsPusher, the running app's live values (mic sync offset, captions) into
  OBS from a thread of its own, never blocking the caller.
- `target.py`: what to set up, from the running app's record or the saved settings.
- `running_app.py`: the record the running app keeps in the config folder.
- `credentials.py`: the obs-websocket password, in the system keyring or a private file.
- `window_geometry.py`: where an X11 window is on screen (for the screen-capture fallback).
- `command.py`: the `obs setup` command line.
"""
