"""``python -m synth``: settings from the environment, logging, run until SIGTERM."""

from servicekit.runner import main

if __name__ == "__main__":
    main("synth")
