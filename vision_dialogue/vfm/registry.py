"""The VFM tool registry (ROS-free).

Every tool's op id, Visual ChatGPT name and class, action type, usage text with input/output format
(worded for the LLM, adapted from Visual ChatGPT), the checkpoints it needs and their defaults;
plus the Visual ChatGPT prompt pieces (prefix, format instructions, suffix, tool list text and the
"Received" turn for a shared image).

In Visual ChatGPT a tool's input is one comma separated string starting with the image path;
here the image and the text travel as separate goal fields, and the tool list text tells the
LLM exactly that form ("image_file, text").
"""
from __future__ import annotations

from dataclasses import dataclass

IMAGE_TO_TEXT = "image_to_text"
IMAGE_TO_IMAGE = "image_to_image"
TEXT_TO_IMAGE = "text_to_image"
#: the kinds of tool; each has one action type (ros/vfm_actions.py)
ACTION_TYPES = (IMAGE_TO_TEXT, IMAGE_TO_IMAGE, TEXT_TO_IMAGE)

# checkpoint key -> default (what Visual ChatGPT used, or the named successor)
DEFAULT_CHECKPOINTS: dict[str, str] = {
    "caption": "Salesforce/blip-image-captioning-base",
    "vqa": "Salesforce/blip-vqa-base",
    "sd": "runwayml/stable-diffusion-v1-5",
    "pix2pix": "timbrooks/instruct-pix2pix",
    "inpaint": "runwayml/stable-diffusion-inpainting",
    "clipseg": "CIDAS/clipseg-rd64-refined",
    "depth": "Intel/dpt-hybrid-midas",
    "seg": "openmmlab/upernet-convnext-small",
    "detect": "google/owlvit-base-patch32",
    "hed_annotator": "lllyasviel/Annotators",
    "controlnet_canny": "lllyasviel/sd-controlnet-canny",
    "controlnet_line": "lllyasviel/sd-controlnet-mlsd",
    "controlnet_hed": "lllyasviel/sd-controlnet-hed",
    "controlnet_scribble": "lllyasviel/sd-controlnet-scribble",
    "controlnet_pose": "lllyasviel/sd-controlnet-openpose",
    "controlnet_depth": "lllyasviel/sd-controlnet-depth",
    "controlnet_normal": "lllyasviel/sd-controlnet-normal",
    "controlnet_seg": "lllyasviel/sd-controlnet-seg",
    "sam": "facebook/sam-vit-huge",
    "grounding": "IDEA-Research/grounding-dino-tiny",
}

_IMG = "The input to this tool should be a string, representing the image_file"
_IMG_TEXT = ("The input to this tool should be a comma separated string of two, "
             "representing the image_file and {what} (in English)")
_OUT_IMG = " It returns the file name of the new image."


@dataclass(frozen=True)
class ModelSpec:
    """A model tools run on: its class under vfm/models and what it is built from."""

    cls: str                     # "module.Class" under vision_dialogue/vfm/models
    checkpoint: str = ""         # key of DEFAULT_CHECKPOINTS ("" = none, or shipped weights)
    checkpoint_file: str = ""    # a file inside the checkpoint directory, if it is one file
    base_checkpoint: str = ""    # ControlNet: the Stable Diffusion checkpoint it conditions
    reports_steps: bool = False  # reports progress per denoising step itself
    eager: bool = False          # nothing to load: built with the tool runtime
    generates: bool = False      # makes new images: they pass the safety checker


#: every model the tools use; tools that name the same model share one instance per device
MODELS: dict[str, ModelSpec] = {
    "opencv": ModelSpec("opencv_maps.OpenCvMaps", eager=True),
    "caption": ModelSpec("blip.Captioner", "caption"),
    "vqa": ModelSpec("blip.QuestionAnswerer", "vqa"),
    "detect": ModelSpec("owlvit.Detector", "detect"),
    "sd": ModelSpec("diffusion.TextToImage", "sd", reports_steps=True, generates=True),
    "pix2pix": ModelSpec("diffusion.InstructPix2Pix", "pix2pix", reports_steps=True,
                         generates=True),
    "clipseg": ModelSpec("clipseg.TextMasker", "clipseg"),
    "inpaint": ModelSpec("diffusion.Inpainter", "inpaint", reports_steps=True, generates=True),
    "sam": ModelSpec("sam.Segmenter", "sam"),
    "grounding": ModelSpec("grounding.GroundingDetector", "grounding"),
    "hed": ModelSpec("hed.HedDetector", "hed_annotator", checkpoint_file="ControlNetHED.pth"),
    "pose": ModelSpec("pose.PoseDetector"),
    "seg": ModelSpec("upernet.Segmenter", "seg"),
    "depth": ModelSpec("dpt.DepthEstimator", "depth"),
    **{f"controlnet_{c}": ModelSpec("diffusion.ControlNetGenerator", f"controlnet_{c}",
                                    base_checkpoint="sd", reports_steps=True, generates=True)
       for c in ("canny", "line", "hed", "scribble", "pose", "seg", "depth", "normal")},
}

#: checkpoint key -> the one file inside its directory that the model loads, where it is a file
CHECKPOINT_FILES = {m.checkpoint: m.checkpoint_file for m in MODELS.values() if m.checkpoint_file}


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the LLM and the server see it, and how the tool runtime runs it.

    `getattr(MODELS[model] instance, call)(*args)` with args from ("rgb", "text", "helper",
    "ctx"); "helper" is the instance of MODELS[helper], a second model the call leans on (the
    mask finder of remove/replace, the detector of segment_object, the captioner of outpaint).
    """

    op: str                      # op id in goals and in file names (no "_")
    name: str                    # Visual ChatGPT tool name
    vcg_class: str               # Visual ChatGPT class, accepted in the `load` parameter
    action_type: str             # image_to_text | image_to_image | text_to_image
    description: str             # usage text with input/output format
    needs_text: bool = False
    model: str = ""              # key of MODELS
    call: str = "run"            # method of the model
    args: tuple[str, ...] = ("rgb",)
    helper: str = ""             # key of MODELS: a second model the call uses

    @property
    def models(self) -> tuple[str, ...]:
        """The MODELS it runs on: the helper first, its own model last."""
        return ((self.helper,) if self.helper else ()) + (self.model,)

    @property
    def checkpoints(self) -> tuple[str, ...]:
        """Checkpoint keys it loads: the helper's, the base's, its own."""
        m = MODELS[self.model]
        keys = (MODELS[self.helper].checkpoint if self.helper else "", m.base_checkpoint,
                m.checkpoint)
        return tuple(k for k in keys if k)

    @property
    def weight_free(self) -> bool:
        return not self.checkpoints

    def usage(self) -> str:
        """The "name: description" line of the LLM's tool list."""
        return f"{self.name}: {self.description}"


def _map_tool(op, name, cls, like, model="opencv", call="run"):
    return ToolSpec(op, name, cls, IMAGE_TO_IMAGE,
                    f"useful when you want to {like}. {_IMG}.{_OUT_IMG}", model=model,
                    call=call)


def _cond_tool(op, name, cls, what, like, ckpt):
    return ToolSpec(op, name, cls, IMAGE_TO_IMAGE,
                    f"useful when you want to generate a new real image from both the user "
                    f"description and {what}. like: {like}. "
                    + _IMG_TEXT.format(what="the user description") + "." + _OUT_IMG,
                    needs_text=True, model=ckpt, args=("rgb", "text", "ctx"))


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("caption", "Get Photo Description", "ImageCaptioning", IMAGE_TO_TEXT,
             "useful when you want to know what is inside the photo. receives image_file as "
             f"input. {_IMG}. It returns a one-sentence description.",
             model="caption"),
    ToolSpec("vqa", "Answer Question About The Image", "VisualQuestionAnswering", IMAGE_TO_TEXT,
             "useful when you need an answer for a question based on an image. like: what is "
             "the background color of the last image, how many cats in this figure, what is in "
             "this figure. " + _IMG_TEXT.format(what="the question") + ". It returns a short "
             "answer.", needs_text=True, model="vqa", args=("rgb", "text")),
    ToolSpec("detect", "Detect the Given Object", "Text2Box", IMAGE_TO_TEXT,
             "useful when you only want to detect or find out given objects in the picture. "
             + _IMG_TEXT.format(what="the text description of the object(s) to be found, "
                                "several separated by commas")
             + ". It returns each found object with its box [x1, y1, x2, y2] in pixels and a "
             "score.", needs_text=True, model="detect", args=("rgb", "text")),
    ToolSpec("text2image", "Generate Image From User Input Text", "Text2Image", TEXT_TO_IMAGE,
             "useful when you want to generate an image from a user input text and save it to a "
             "file. like: generate an image of an object or something, or generate an image "
             "that includes some objects. The input to this tool should be a string, "
             "representing the text (in English) used to generate image." + _OUT_IMG,
             needs_text=True, model="sd", args=("text", "ctx")),
    ToolSpec("pix2pix", "Instruct Image Using Text", "InstructPix2Pix", IMAGE_TO_IMAGE,
             "useful when you want to the style of the image to be like the text. like: make it "
             "look like a painting. or make it like a robot. "
             + _IMG_TEXT.format(what="the text") + "." + _OUT_IMG, needs_text=True,
             model="pix2pix", args=("rgb", "text", "ctx")),
    ToolSpec("remove", "Remove Something From The Photo", "ImageEditing", IMAGE_TO_IMAGE,
             "useful when you want to remove and object or something from the photo from its "
             "description or location. "
             + _IMG_TEXT.format(what="the object need to be removed") + "." + _OUT_IMG,
             needs_text=True, model="inpaint", call="remove", helper="clipseg",
             args=("rgb", "text", "helper", "ctx")),
    ToolSpec("replace", "Replace Something From The Photo", "ImageEditing", IMAGE_TO_IMAGE,
             "useful when you want to replace an object from the object description or location "
             "with another object from its description. The input to this tool should be a "
             "comma separated string of three, representing the image_file, the object to be "
             "replaced (in English), the object to be replaced with (in English)." + _OUT_IMG,
             needs_text=True, model="inpaint", call="replace_described", helper="clipseg",
             args=("rgb", "text", "helper", "ctx")),
    ToolSpec("segment", "Segment the Image", "Segmenting", IMAGE_TO_IMAGE,
             "useful when you want to segment all the part of the image, but not segment a "
             "certain object. like: segment all the object in this image, or generate "
             "segmentations on this image, or segment the image, or perform segmentation on this "
             f"image, or segment all the object in this image. {_IMG}. It returns the file name "
             "of the image with each segment in its own colour, and how many segments it found.",
             model="sam", call="segment", args=("rgb", "ctx")),
    ToolSpec("segmentobject", "Segment the given object", "ObjectSegmenting", IMAGE_TO_IMAGE,
             "useful when you only want to segment the certain objects in the picture according "
             "to the given text. like: segment the cat, or can you segment an object for me. "
             + _IMG_TEXT.format(what="the text description of the object(s) to be found, "
                                "several separated by commas")
             + ". It returns the file name of the image with each found object's mask, and "
             "which objects it found; when none is found it says so and makes no image.",
             needs_text=True, model="sam", call="segment_objects", helper="grounding",
             args=("rgb", "text", "helper", "ctx")),
    ToolSpec("outpaint", "Extend An Image", "InfinityOutPainting", IMAGE_TO_IMAGE,
             "useful when you need to extend an image into a larger image. like: extend the "
             "image into a resolution of 2048x1024, extend the image into 2048x1024. "
             + _IMG_TEXT.format(what="the resolution of widthxheight, or a scale like 2x")
             + "." + _OUT_IMG, needs_text=True, model="inpaint", call="outpaint",
             helper="caption", args=("rgb", "text", "helper", "ctx")),
    _map_tool("canny", "Edge Detection On Image", "Image2Canny",
              "detect the edge of the image. like: detect the edges of this image, or canny "
              "detection on image, or perform edge detection on this image, or detect the canny "
              "image of this image", call="canny"),
    _cond_tool("canny2image", "Generate Image Condition On Canny Image", "CannyText2Image",
               "a canny image", "generate a real image of a object or something from this canny "
               "image, or generate a new real image of a object or something from this edge image",
               "controlnet_canny"),
    _map_tool("line", "Line Detection On Image", "Image2Line",
              "detect the straight line of the image. like: detect the straight lines of this "
              "image, or straight line detection on image, or perform straight line detection "
              "on this image, or detect the straight line image of this image", call="lines"),
    _cond_tool("line2image", "Generate Image Condition On Line Image", "LineText2Image",
               "a straight line image", "generate a real image of a object or something from "
               "this straight line image, or generate a new real image of a object or something "
               "from this straight lines", "controlnet_line"),
    _map_tool("hed", "Hed Detection On Image", "Image2Hed",
              "detect the soft hed boundary of the image. like: detect the soft hed boundary of "
              "this image, or hed boundary detection on image, or perform hed boundary detection "
              "on this image, or detect soft hed boundary image of this image",
              model="hed"),
    _cond_tool("hed2image", "Generate Image Condition On Soft Hed Boundary Image",
               "HedText2Image", "a soft hed boundary image", "generate a real image of a object "
               "or something from this soft hed boundary image, or generate a new real image of "
               "a object or something from this hed boundary", "controlnet_hed"),
    _map_tool("scribble", "Sketch Detection On Image", "Image2Scribble",
              "generate a scribble of the image. like: generate a scribble of this image, or "
              "generate a sketch from this image, detect the sketch from this image",
              call="scribble"),
    _cond_tool("scribble2image", "Generate Image Condition On Sketch Image",
               "ScribbleText2Image", "a scribble image or a sketch image", "generate a real "
               "image of a object or something from this sketch", "controlnet_scribble"),
    _map_tool("pose", "Pose Detection On Image", "Image2Pose",
              "detect the human pose of the image. like: generate human poses of this image, or "
              "generate a pose image from this image", model="pose"),
    _cond_tool("pose2image", "Generate Image Condition On Pose Image", "PoseText2Image",
               "a human pose image", "generate a real image of a human from this human pose "
               "image, or generate a new real image of a human from this pose", "controlnet_pose"),
    _map_tool("seg", "Segmentation On Image", "Image2Seg",
              "detect segmentations of the image. like: segment this image, or generate "
              "segmentations on this image, or perform segmentation on this image",
              model="seg"),
    _cond_tool("seg2image", "Generate Image Condition On Segmentations", "SegText2Image",
               "segmentations", "generate a real image of a object or something from this "
               "segmentation image, or generate a new real image of a object or something from "
               "these segmentations", "controlnet_seg"),
    _map_tool("depth", "Predict Depth On Image", "Image2Depth",
              "detect depth of the image. like: generate the depth from this image, or detect "
              "the depth map on this image, or predict the depth for this image",
              model="depth", call="depth"),
    _cond_tool("depth2image", "Generate Image Condition On Depth", "DepthText2Image",
               "depth image", "generate a real image of a object or something from this depth "
               "image, or generate a new real image of a object or something from the depth map",
               "controlnet_depth"),
    _map_tool("normal", "Predict Normal Map On Image", "Image2Normal",
              "detect norm map of the image. like: generate normal map from this image, or "
              "predict normal map of this image", model="depth",
              call="normal"),
    _cond_tool("normal2image", "Generate Image Condition On Normal Map", "NormalText2Image",
               "normal map", "generate a real image of a object or something from this normal "
               "map, or generate a new real image of a object or something from the normal map",
               "controlnet_normal"),
)

BY_OP: dict[str, ToolSpec] = {t.op: t for t in TOOLS}
BY_CLASS: dict[str, tuple[ToolSpec, ...]] = {}
for _t in TOOLS:
    BY_CLASS[_t.vcg_class] = BY_CLASS.get(_t.vcg_class, ()) + (_t,)
WEIGHT_FREE = tuple(t.op for t in TOOLS if t.weight_free)


def get(op: str) -> ToolSpec:
    """The spec of `op`; KeyError naming the known ops otherwise."""
    try:
        return BY_OP[op]
    except KeyError:
        raise KeyError(f"unknown tool {op!r}; known: {', '.join(BY_OP)}") from None


# ---- Visual ChatGPT prompt manager pieces -------------------------------------------------

PREFIX = """{bot} is designed to be able to assist with a wide range of text and visual related \
tasks, from answering simple questions to providing in-depth explanations and discussions on a \
wide range of topics. {bot} is able to generate human-like text based on the input it receives, \
allowing it to engage in natural-sounding conversations and provide responses that are coherent \
and relevant to the topic at hand.

{bot} is able to process and understand large amounts of text and images. As a language model, \
{bot} can not directly read images, but it has a list of tools to finish different visual \
tasks. Each image will have a file name formed as "xxx.png", and {bot} can invoke different \
tools to indirectly understand pictures. When talking about images, {bot} is very strict to the \
file name and will never fabricate nonexistent files. When using tools to generate new image \
files, {bot} is also known that the image may not be the same as the user's demand, and will use \
other visual question answering tools or description tools to observe the real image. {bot} is \
able to use tools in a sequence, and is loyal to the tool observation outputs rather than faking \
the image content and image file name. It will remember to provide the file name from the last \
tool observation, if a new image is generated.

Human may provide new figures to {bot} with a description. The description helps {bot} to \
understand this image, but {bot} should use tools to finish following tasks, rather than \
directly imagine from the description.

TOOLS:
------

{bot} has access to the following tools:"""

FORMAT_INSTRUCTIONS = """To use a tool, please use the following format:

```
Thought: Do I need to use a tool? Yes
Action: the action to take, should be one of [{tool_names}]
Action Input: the input to the action (in English)
Observation: the result of the action
```

When you have a response to say to the Human, or if you do not need to use a tool, you MUST use \
the format:

```
Thought: Do I need to use a tool? No
{ai_prefix}: [your response here]
```
"""

SUFFIX = """You are very strict to the filename correctness and will never fake a file name if \
it does not exist.
You will remember to provide the image file name loyally if it's provided in the last tool \
observation.
When using tools, for all the input except the filename (e.g. object, text, user description, \
and question), you can only describe them in English even if the Human may ask you in other \
languages.

Begin!

Previous conversation history:
{chat_history}

New input: {input}
Since {bot} is a text language model, {bot} must use tools to observe images rather than \
imagination.
The thoughts and observations are only visible for {bot}, {bot} should remember to repeat \
important information in the final response for Human.
Thought: Do I need to use a tool? {agent_scratchpad}"""


def tool_list_text(tools=TOOLS) -> str:
    """The "> name: description" block listed after the prefix (LangChain's format)."""
    return "\n".join(f"> {t.usage()}" for t in tools)


def tool_names(tools=TOOLS) -> str:
    return ", ".join(t.name for t in tools)


def system_prompt(tools=TOOLS, bot: str = "Visual ChatGPT", ai_prefix: str = "AI") -> str:
    """Prefix + tool list + format instructions: the static part of the agent prompt."""
    return "\n\n".join([PREFIX.format(bot=bot), tool_list_text(tools),
                        FORMAT_INSTRUCTIONS.format(tool_names=tool_names(tools),
                                                   ai_prefix=ai_prefix)])


def suffix(chat_history: str, user_input: str, scratchpad: str = "",
           bot: str = "Visual ChatGPT") -> str:
    return SUFFIX.format(bot=bot, chat_history=chat_history, input=user_input,
                         agent_scratchpad=scratchpad)


def image_received_turn(image_file: str, description: str,
                        ai_prefix: str = "AI") -> tuple[str, str]:
    """The fake (Human, AI) exchange Visual ChatGPT adds to memory when a user shares an image."""
    human = (f"provide a figure named {image_file}. The description is: {description}. This "
             "information helps you to understand this image, but you should use tools to finish "
             "following tasks, rather than directly imagine from my description. If you "
             "understand, say \"Received\".")
    return human, "Received."


def parse_action_input(spec: ToolSpec, action_input: str) -> tuple[str, str]:
    """Split an LLM "Action Input" for `spec` into (image_file, text) goal fields."""
    s = action_input.strip().strip("`\"'")
    if spec.action_type == TEXT_TO_IMAGE:
        return "", s
    head, _, rest = s.partition(",")
    return head.strip(), rest.strip()
