"""The estimate: a setting's memory without a GPU, from one training step on fake tensors.

- estimator.py   Estimate, estimate(), Estimator: the breakdown, its device peak, the largest
                 batch that fits
- corrections.py what turns the fake step's bytes into the device's: calibrated on measured
                 history, stated defaults otherwise
- fake_step.py   one training step on fake tensors: what each storage takes, and when
- storage_bytes.py the counter under the fake step: live storages, rounded as CUDA's allocator
                 rounds them, their peak and their trace, and an operator's own temporaries;
                 the tensors and storages a value holds
- compiled_step.py a compiled model's step as torch.compile runs it (dynamo, AOTAutograd,
                 inductor's partitioner), its graphs counted as inductor's kernels hold memory;
                 the loss modules dynamo puts past the emulation's modes run as it runs them
- inductor_buffers.py a graph's buffers counted as inductor's code makes and frees them: which
                 it writes in place of another or reuses, and its extern kernels' workspaces
- inductor_kernels.py KernelGraph: which of a graph's values inductor makes buffers of, which
                 nodes each of its kernels computes (fused across, reductions into their
                 epilogue, a node computed once into its one reader), each buffer's last reader
- inductor_ops.py which operators inductor fuses into their readers, which make a kernel that
                 fuses what feeds them, which it calls as extern kernels
- inductor_padding.py the strides inductor pads on a GPU, and so the bytes of its kernels'
                 buffers; which buffers it leaves dense
- meta_model.py  the workload's model without memory: built on meta once, copied, faked
- job_rank.py    one rank of a job on several GPUs: FSDP2 sharded on the fake group as it runs,
                 DDP's gradient buckets added
- cuda_emulation.py what CUDA runs differently from the CPU (autocast, the attention kernel
                 (cuDNN's for 16 bits with a mask that takes no gradient: its output in q's
                 layout) and the mask it keeps, a compiled math path's 16-bit gradients,
                 dropout's bool mask, fp32 grouped matmuls)
- cuda_workspaces.py what CUDA's kernels allocate and free inside themselves (the reduction
                 kernel's partial sums, attention's and cuDNN's workspaces, softmax's row check),
                 which convolutions (the step's calls, the model's modules) cuDNN picks
                 kernels for beyond what is modelled, and a bound on strict fp32's forward
                 workspaces
- masks.py       transformers' attention masks decided on fake tensors as a real run does
- real_draws.py  what a fake step cannot know, as a real run has it: a draw of one random
                 number (LayerDrop's), a bincount's length where a minlength bounds it
- allocator.py   a model of the CUDA caching allocator, replaying the step's allocations
                 (cudaMalloc'd segments, or expandable ones where the spec turns them on)
- memory_line.py the device peak against micro batch, per family of specs (an affine fit)
"""
