#!/usr/bin/env bash
# Wheels for the packages the GPU check needs that a CUDA machine's image may lack (IPython, the kernel and
# notebook stack, line_profiler, py-spy), for CPython 3.12 on x86-64, into .whl/ (which tools/gpu_check.sh
# installs to /tmp/site when it exists). Run it where pip can reach an index, before sending the tree to a
# machine that cannot:   bash tools/gpu_wheels.sh && echo /.whl/ >> .git/info/exclude
# The image this was made for (2026-11-28, an H200 with torch 2.11.0+cu130 on Python 3.12.3) already had
# torch, numpy, pandas, matplotlib, psutil, threadpoolctl, tqdm, nvidia-ml-py, triton, pytest and
# pytest-xdist. About 22 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
pkgs=(
  ipython==9.18.1 ipython_pygments_lexers==1.1.1 jedi==0.20.1 parso==0.8.7 matplotlib-inline==0.2.2
  prompt_toolkit==3.0.53 wcwidth==0.9.4 pexpect==4.9.0 ptyprocess==0.7.0 stack-data==0.6.3 executing==2.3.0
  asttokens==3.0.2 pure_eval==0.2.4 traitlets==5.16.1 decorator comm==0.2.3 ipywidgets==8.1.9
  widgetsnbextension==4.0.16 jupyterlab_widgets==3.0.17 line_profiler==5.1.0 py-spy==0.4.3 ipykernel==7.4.0
  debugpy==1.8.22 jupyter_client==8.10.0 jupyter_core==5.9.1 platformdirs==4.14.8 pyzmq==27.3.0 tornado==6.6.1
  nest-asyncio2==1.7.4 nbclient==0.11.0 nbformat==5.11.1 fastjsonschema==2.22.3 jsonschema==4.26.0
  jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 nbconvert==7.17.2 bleach==6.4.0
  tinycss2==1.5.1 webencodings==0.6.1 mistune==3.4.0 pandocfilters==1.5.1 defusedxml==0.7.1
  beautifulsoup4==4.15.0 soupsieve==4.1.3 jupyterlab_pygments==0.3.0
)
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
         manylinux1_x86_64 manylinux_2_5_x86_64; do platforms+=(--platform "$p"); done
mkdir -p .whl
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d .whl "${pkgs[@]}"
ls .whl | wc -l
