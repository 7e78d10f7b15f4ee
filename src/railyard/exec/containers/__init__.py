"""Containers the Pyxis way: images, archives, mounts and Podman, as the job's user."""
