"""``python -m edge``: settings from the environment, logging, serve until SIGTERM."""

from servicekit.runner import main

if __name__ == "__main__":
    main("edge")
