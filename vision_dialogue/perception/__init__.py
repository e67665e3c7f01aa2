"""What a text-only model is told it sees (ROS-free).

Camera frames turned into short text observations with models that ship their weights (MediaPipe,
RapidOCR, OpenCV).

May import: core.
"""
