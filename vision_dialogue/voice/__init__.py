"""Local voice without ROS: audio, voice activity, speech-to-text, text-to-speech.

Audio in and out, voice activity detection, speech-to-text, text-to-speech and the `local`
speech backend built from them.

May import: speech (the backend interface, turn states), llm (sentence splitting). The speech
node's `backend:=local` names `voice.backend:LocalVoiceBackend` in `speech.SPEECH_BACKENDS`, so
`speech` never imports this room; its libraries (faster-whisper, piper-tts, silero-vad,
sounddevice) load only when the backend is chosen.
"""
