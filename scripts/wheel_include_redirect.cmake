# The kilted PyPI wheels export *__rosidl_generator_py targets whose
# INTERFACE_INCLUDE_DIRECTORIES name the wheel builder's interpreter
# (/opt/python/cpXY-cpXY/...), which does not exist here; CMake refuses to
# generate with such paths. Injected with -DCMAKE_PROJECT_INCLUDE=<this file>
# (scripts/build_interfaces.sh, and the colcon workspace test against the
# venv's ROS), it defers a fix-up to the end of the top-level CMakeLists: every
# imported target's missing /opt/python/... include dir is rewritten to
# VISION_MSGS_PYTHON_INCLUDE_DIR / VISION_MSGS_NUMPY_INCLUDE_DIR (the venv
# interpreter's Python / NumPy include dirs). Not needed with apt ROS.
function(_vision_msgs_redirect_wheel_includes)
  get_property(_targets DIRECTORY "${CMAKE_SOURCE_DIR}" PROPERTY IMPORTED_TARGETS)
  foreach(_t IN LISTS _targets)
    get_target_property(_inc "${_t}" INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT _inc)
      continue()
    endif()
    set(_new "")
    set(_changed FALSE)
    foreach(_d IN LISTS _inc)
      if(_d MATCHES "^/opt/python/" AND NOT EXISTS "${_d}")
        set(_changed TRUE)
        if(_d MATCHES "numpy")
          list(APPEND _new "${VISION_MSGS_NUMPY_INCLUDE_DIR}")
        else()
          list(APPEND _new "${VISION_MSGS_PYTHON_INCLUDE_DIR}")
        endif()
      else()
        list(APPEND _new "${_d}")
      endif()
    endforeach()
    if(_changed)
      list(REMOVE_DUPLICATES _new)
      set_target_properties("${_t}" PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_new}")
    endif()
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _vision_msgs_redirect_wheel_includes)
