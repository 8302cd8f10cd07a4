"""Where frames go: the avatar view in the window, and video export."""
