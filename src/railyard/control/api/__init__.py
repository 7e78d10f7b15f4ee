"""The REST API: the app, its dependencies, a router per noun, request and response models."""
