# Source me: `source env.sh`. Activates the venv and the colcon install of vision_dialogue,
# so `python3 -c "import rclpy, vision_dialogue_interfaces.msg"` works and the executables
# (manager_node, camera_node, speech_node, vfm_server, bringup, bag_record, bag_play) are on PATH.
_vd_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)"
# shellcheck source=/dev/null
source "$_vd_root/scripts/venv_path.sh"
_vd_venv="${VD_VENV:-$(_vd_venv_default "$_vd_root")}"
if [ ! -x "$_vd_venv/bin/python" ]; then
  echo "env.sh: no venv at $_vd_venv; run scripts/setup.sh first" >&2
  return 1 2>/dev/null || exit 1
fi
# shellcheck source=/dev/null
source "$_vd_venv/bin/activate"
_vd_site="$("$_vd_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
_vd_pyver="$("$_vd_venv/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
_vd_prepend() {  # _vd_prepend VAR DIR: put DIR first in the colon list VAR, once
  local cur="${!1:-}"
  case ":$cur:" in *":$2:"*) ;; *) export "$1=$2${cur:+:$cur}" ;; esac
}
if [ -z "${ROS_DISTRO:-}" ]; then
  # ROS 2 from the PyPI wheels: the venv is the ROS prefix. Set the library path here so the
  # wheels' bootstrapper does not re-exec every Python process to set it.
  for _d in "$_vd_site"/ros_*.libs; do [ -d "$_d" ] && _vd_prepend LD_LIBRARY_PATH "$_d"; done
  _vd_prepend LD_LIBRARY_PATH "$_vd_venv/lib"
  _vd_prepend AMENT_PREFIX_PATH "$_vd_venv"
  _vd_prepend CMAKE_PREFIX_PATH "$_vd_venv"
  export _ROS_WHEELS_BOOTSTRAP_COMPLETE=1
  export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
fi
# interface packages setup built: ours (vision_dialogue_interfaces) and, from third_party/,
# vision_msgs and hri_msgs; then the package itself
for _d in "$_vd_root"/install/*_msgs "$_vd_root"/install/*_interfaces; do
  [ -d "$_d/share" ] || continue
  _vd_prepend AMENT_PREFIX_PATH "$_d"
  _vd_prepend CMAKE_PREFIX_PATH "$_d"
  _vd_prepend LD_LIBRARY_PATH "$_d/lib"
  _vd_prepend PYTHONPATH "$_d/lib/python$_vd_pyver/site-packages"
done
_vd_inst="$_vd_root/install/vision_dialogue"
if [ -d "$_vd_inst" ]; then  # (not yet during the first build)
  _vd_prepend AMENT_PREFIX_PATH "$_vd_inst"
  _vd_prepend CMAKE_PREFIX_PATH "$_vd_inst"
fi
_vd_prepend LD_LIBRARY_PATH "$_vd_inst/lib"
_vd_prepend PYTHONPATH "$_vd_inst/lib/python$_vd_pyver/site-packages"
_vd_prepend PATH "$_vd_inst/lib/vision_dialogue"  # manager_node, camera_node, ... as commands
# Fast DDS with large shared-memory segments (config/fastdds.xml), so raw camera frames reach
# other processes; the install's environment hook does the same. A profile already set wins.
if [ -z "${FASTDDS_DEFAULT_PROFILES_FILE:-}" ] && [ -z "${VD_NO_DDS_PROFILE:-}" ]; then
  export FASTDDS_DEFAULT_PROFILES_FILE="$_vd_root/config/fastdds.xml"
fi
if [ "${1:-}" != "--no-install-check" ] && [ ! -d "$_vd_inst/lib/vision_dialogue" ]; then
  echo "env.sh: vision_dialogue is not built yet; run scripts/setup.sh" >&2
fi
unset _vd_site _vd_pyver _vd_inst _d
