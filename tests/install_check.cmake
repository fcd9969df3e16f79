# CTest's cmake_install: `cmake --install BUILD_DIR --prefix PREFIX` into an empty folder,
# then every file the install rules promise is there and both installed binaries answer
# --version. (cmake -DBUILD_DIR=... -DPREFIX=... -P install_check.cmake)
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc}):\n${out}${err}")
endif()
foreach(f bin/hotfix-agent bin/live-patching-service
          lib/systemd/system/live-patching-service.service
          share/live-patching/prometheus/alerts.yml share/doc/aks-live-patching/README.md
          share/doc/aks-live-patching/SERVICE.md share/doc/aks-live-patching/ROLLOUTS.md
          share/doc/aks-live-patching/OPERATIONS.md)
  if(NOT EXISTS "${PREFIX}/${f}")
    message(FATAL_ERROR "cmake --install did not install ${f}:\n${out}")
  endif()
endforeach()
foreach(b hotfix-agent live-patching-service)
  execute_process(COMMAND "${PREFIX}/bin/${b}" --version RESULT_VARIABLE rc
                  OUTPUT_VARIABLE version ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT version MATCHES "^${b} .* \\(revision [0-9a-z-]+\\)\n$")
    message(FATAL_ERROR "installed ${b} --version: ${rc} '${version}' ${err}")
  endif()
endforeach()
file(REMOVE_RECURSE "${PREFIX}")
