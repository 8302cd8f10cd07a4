"""The desktop app: Qt window, settings, command line."""
