"""Scenario 10: the set-up of report 1, small — a causal LM offloaded in part to the CPU, trained with
LoRA and gradient checkpointing.

A Llama-style model is built from a config (random weights, nothing downloaded), saved, and loaded
back with ``device_map="auto"`` and a ``max_memory`` that forces some layers onto the CPU (accelerate
then keeps them as meta tensors on the GPU side with hooks). PEFT LoRA (r=8 on q_proj/v_proj),
gradient checkpointing, one training step. Older stacks raised ``expected device meta but got cuda:0``
here; whatever the installed versions do is what the bundle records.
Expected: meta-device-checkpoint when it fails; the offload warning alone is reported as a risk.
"""

from __future__ import annotations

import tempfile

import torch
from peft import LoraConfig, TaskType, get_peft_model
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

config = LlamaConfig(vocab_size=4096, hidden_size=1024, intermediate_size=2816, num_hidden_layers=12,
                     num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=512)
with tempfile.TemporaryDirectory() as tmp:
    LlamaForCausalLM(config).save_pretrained(tmp)
    model = AutoModelForCausalLM.from_pretrained(
        tmp, device_map="auto", max_memory={0: "300MiB", "cpu": "8GiB"}, torch_dtype=torch.bfloat16)
    print("device map:", sorted(set(getattr(model, "hf_device_map", {}).values()), key=str), flush=True)
    model.gradient_checkpointing_enable()
    model.enable_input_require_grads()
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                             lora_dropout=0.05, bias="none", task_type=TaskType.CAUSAL_LM))
    model.print_trainable_parameters()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-5)
    ids = torch.randint(0, config.vocab_size, (1, 128), device="cuda")
    out = model(input_ids=ids, labels=ids)
    print(f"forward done, loss {out.loss.item():.4f}; backward", flush=True)
    out.loss.backward()
    opt.step()
    print("one training step finished without error", flush=True)
