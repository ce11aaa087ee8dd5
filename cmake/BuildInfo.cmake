# What `ringtrain --version` reports about the build, fixed at configure time into
# ${PROJECT_BINARY_DIR}/generated/ringtrain/cli/build_info.h: the version (project()), the git commit
# ("unknown" outside a git checkout; "-dirty" when tracked files differ from it) and the compiler.
find_package(Git QUIET)
set(RINGTRAIN_GIT_COMMIT "unknown")
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short HEAD
                  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE commit
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(rc EQUAL 0 AND commit)
    set(RINGTRAIN_GIT_COMMIT "${commit}")
    execute_process(COMMAND ${GIT_EXECUTABLE} status --porcelain --untracked-files=no
                    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE changes ERROR_QUIET)
    if(changes)
      string(APPEND RINGTRAIN_GIT_COMMIT "-dirty")
    endif()
    # Re-run this when a commit or checkout moves HEAD (the worktree's HEAD reflog), so the build names
    # the commit it was built from. Edits after configuring do not re-run it: "-dirty" is as of then.
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --path-format=absolute --git-path logs/HEAD
                    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE head_log
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(rc EQUAL 0 AND EXISTS "${head_log}")
      set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${head_log}")
    endif()
  endif()
endif()
set(RINGTRAIN_COMPILER "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}")
configure_file(${PROJECT_SOURCE_DIR}/src/ringtrain/cli/build_info.h.in
               ${PROJECT_BINARY_DIR}/generated/ringtrain/cli/build_info.h @ONLY)
