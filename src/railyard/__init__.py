"""railyard: plan, predict, schedule and operate shared GPU training clusters."""

__version__ = "0.1.0"
