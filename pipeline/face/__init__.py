"""Faces in pictures: portrait loading, finding faces of any size (detection.py) and their
landmarks (landmarks.py), what a photo avatar is built from."""
