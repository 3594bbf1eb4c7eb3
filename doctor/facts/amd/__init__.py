"""AMD: amdgpu sysfs and the KFD topology, the amdsmi bindings, amd-smi/rocm-smi/rocminfo output."""
