"""synth: the only StreamTTS service that loads the model (Kokoro-82M); `python -m synth`."""
