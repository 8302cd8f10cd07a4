"""The Qt window and its parts: main window, settings panel, portrait import, messages."""
