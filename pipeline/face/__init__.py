"""Faces in pictures: portrait loading and face landmarks, what a photo avatar is built from."""
