"""Which architectures the zoo builds, and how: torchvision, timm and transformers models from
small configs with seeded random weights, and classic torch modules.

A builder returns (model, example inputs as a dict of keyword arguments). Nothing is
downloaded: every model is instantiated from its config (`weights=None`, `pretrained=False`,
`from_config`).
"""

import inspect

import torch

# torchvision classification models: the smallest variant of each family (the zoo counts
# architectures, not widths), at 64x64 except where the architecture fixes the image size.
TORCHVISION = {
    "alexnet": 64, "convnext_tiny": 64, "densenet121": 64, "efficientnet_b0": 64, "efficientnet_v2_s": 64,
    "googlenet": 64, "inception_v3": 80, "maxvit_t": 224, "mnasnet0_5": 64, "mobilenet_v2": 64,
    "mobilenet_v3_small": 64, "regnet_x_400mf": 64, "regnet_y_400mf": 64, "resnet18": 64, "resnext50_32x4d": 64,
    "shufflenet_v2_x0_5": 64, "squeezenet1_1": 64, "swin_t": 64, "swin_v2_t": 64, "vgg11": 64,
    "vgg11_bn": 64, "vit_b_16": 224, "wide_resnet50_2": 64,
}
# torchvision segmentation and video models (small inputs).
TORCHVISION_OTHER = {
    "segmentation.lraspp_mobilenet_v3_large": (3, 64, 64), "segmentation.fcn_resnet50": (3, 64, 64),
    "segmentation.deeplabv3_mobilenet_v3_large": (3, 64, 64),
    "video.r3d_18": (3, 4, 32, 32), "video.mc3_18": (3, 4, 32, 32), "video.r2plus1d_18": (3, 4, 32, 32),
}
# timm: one small model per family (names as timm lists them).
TIMM = [
    "resnet10t", "resnet18d", "seresnet18", "resnext26ts", "regnetx_002", "regnety_002", "efficientnet_b0",
    "efficientnet_lite0", "mobilenetv2_050", "mobilenetv3_small_050", "mobilenetv4_conv_small", "mixnet_s",
    "mnasnet_small", "fbnetc_100", "ghostnet_050", "lcnet_050", "tinynet_e", "hardcorenas_a", "rexnet_100",
    "dla34", "dpn48b", "cspresnet50", "cspdarknet53", "darknet17", "hrnet_w18_small", "vovnet39a",
    "ese_vovnet19b_dw", "densenet121", "selecsls42b", "res2net50_14w_8s", "resnest14d", "skresnet18",
    "tresnet_m", "repvgg_a0", "repghostnet_050", "convnext_atto", "convnextv2_atto", "edgenext_xx_small",
    "efficientformer_l1", "efficientformerv2_s0", "levit_128s", "mobilevit_xxs", "mobilevitv2_050",
    "poolformer_s12", "poolformerv2_s12", "convmixer_768_32", "convit_tiny", "crossvit_tiny_240",
    "cait_xxs24_224", "coat_lite_tiny", "deit_tiny_patch16_224", "vit_tiny_patch16_224", "beit_base_patch16_224",
    "xcit_nano_12_p16_224", "twins_svt_small", "pit_ti_224", "tnt_s_patch16_224", "swin_tiny_patch4_window7_224",
    "mixer_s32_224", "resmlp_12_224", "gmlp_ti16_224", "nest_tiny", "pvt_v2_b0", "visformer_tiny",
    "fastvit_t8", "mobileone_s0", "inception_next_tiny", "maxvit_nano_rw_256", "coatnet_nano_rw_224",
    "davit_tiny", "tiny_vit_5m_224", "gcvit_xxtiny", "hgnet_tiny", "hgnetv2_b0", "rdnet_tiny",
    "sequencer2d_s", "focalnet_tiny_srf", "eva02_tiny_patch14_224", "nfnet_l0", "nf_resnet26", "dm_nfnet_f0",
    "vgg11", "inception_v3", "xception41", "senet154", "legacy_seresnet18", "bat_resnext26ts",
    "halonet26t", "lambda_resnet26t", "botnet26t_256", "sebotnet33ts_256", "eca_resnet33ts", "gernet_s",
    "starnet_s050", "mambaout_femto", "fasternet_t0", "shvit_s1", "csatv2", "vitamin_small_224",
]
# transformers: every model type whose base model builds from a small config (shrunk below)
# and runs a forward on torch CPU; probed with `python -m zoo.catalog --probe`.
HF_SHRINK = {
    32: ["hidden_size", "d_model", "n_embd", "dim", "embed_dim", "embedding_size", "d_embed", "word_embed_proj_dim",
         "projection_dim", "hidden_dim_model"],
    2: ["num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers", "decoder_layers",
        "num_decoder_layers", "num_encoder_layers"],
    4: ["num_attention_heads", "n_head", "n_heads", "encoder_attention_heads", "decoder_attention_heads",
        "num_heads", "num_key_value_heads"],
    37: ["intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff", "n_inner", "hidden_dim",
         "n_positions_ffn"],
    99: ["vocab_size"],
    64: ["max_position_embeddings", "n_positions", "max_seq_len"],
}


def _shrink(config):
    for value, keys in HF_SHRINK.items():
        for key in keys:
            if isinstance(getattr(config, key, None), int) and not isinstance(getattr(config, key), bool):
                setattr(config, key, value)
    if hasattr(config, "head_dim") and isinstance(config.head_dim, int):
        config.head_dim = 8
    return config


def hf_inputs(model, config, batch=2, seq=12):
    """Keyword inputs for a transformers model's forward, from its main input name."""
    g = torch.Generator().manual_seed(2)
    params = inspect.signature(model.forward).parameters
    name = getattr(model, "main_input_name", "input_ids")
    if name == "input_ids":
        vocab = getattr(config, "vocab_size", 99) or 99
        kw = {"input_ids": torch.randint(3, min(vocab, 99), (batch, seq), generator=g)}
        if "decoder_input_ids" in params:
            kw["decoder_input_ids"] = torch.randint(3, min(vocab, 99), (batch, seq // 2), generator=g)
        return kw
    if name == "pixel_values":
        size = getattr(config, "image_size", 32)
        size = size[0] if isinstance(size, (list, tuple)) else size
        ch = getattr(config, "num_channels", 3)
        return {"pixel_values": torch.randn(batch, ch, size, size, generator=g)}
    if name == "input_values":
        return {"input_values": torch.randn(batch, 1600, generator=g)}
    if name == "input_features":
        mels = getattr(config, "num_mel_bins", getattr(config, "feature_size", 80))
        return {"input_features": torch.randn(batch, mels, 3000 if "whisper" in config.model_type else 64, generator=g)}
    raise ValueError(f"unknown main input {name!r}")


def _untie(model):
    """Weight matrices initialised to all zeros (afmoe's MoE router gate) make every expert's
    score equal, and top-k among ties is unspecified (torch CPU's order is its sort
    algorithm's): two correct backends would route tokens to different experts. They get
    seeded small random values, so the comparison tests the arithmetic, not a tie order."""
    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and p.is_floating_point() and not bool(p.any()):
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.02)


def hf_builder(model_type):
    def make():
        import transformers

        config = _shrink(transformers.AutoConfig.for_model(model_type))
        model = transformers.AutoModel.from_config(config)
        _untie(model)
        return model, hf_inputs(model, config)
    return make


def _first_input(model):
    """The name of a module's first forward argument (`x`, `input`, ...)."""
    return next(iter(inspect.signature(model.forward).parameters))


def tv_builder(name, size):
    def make():
        import torchvision

        kw = {"num_classes": 10} if "." not in name else {}
        if name.startswith("segmentation."):
            kw = {"num_classes": 5, "weights_backbone": None}
        module, _, fn = name.rpartition(".")
        ns = getattr(torchvision.models, module) if module else torchvision.models
        extra = {"aux_logits": False, "init_weights": True} if fn in ("inception_v3", "googlenet") else {}
        model = getattr(ns, fn)(weights=None, **kw, **extra)
        shape = (3, size, size) if isinstance(size, int) else size
        return model, {_first_input(model): torch.randn(2, *shape, generator=torch.Generator().manual_seed(2))}
    return make


def timm_builder(name):
    def make():
        import timm

        model = timm.create_model(name, pretrained=False, num_classes=10)
        x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(2))
        try:
            # 64x64 where the architecture takes any size (fast); else its configured size.
            with torch.no_grad():
                model.eval()(x)
        except Exception:  # noqa: BLE001 - the architecture fixes its input size
            size = model.pretrained_cfg.get("input_size", (3, 224, 224))
            x = torch.randn(2, *size, generator=torch.Generator().manual_seed(2))
        return model, {_first_input(model): x}
    return make


class Recurrent(torch.nn.Module):
    """A 2-layer recurrent net (`cell`: LSTM, GRU, RNN) with a linear head."""

    def __init__(self, cell):
        super().__init__()
        self.rnn = getattr(torch.nn, cell)(16, 24, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(24, 5)

    def forward(self, x):
        return self.head(self.rnn(x)[0])


def _g():
    return torch.Generator().manual_seed(2)


CLASSIC = {
    "mlp": lambda: (torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                                        torch.nn.Linear(64, 10)), {"input": torch.randn(8, 20, generator=_g())}),
    "cnn": lambda: (torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                                        torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                                        torch.nn.Linear(8 * 8 * 8, 10)), {"input": torch.randn(4, 3, 16, 16, generator=_g())}),
    "lstm": lambda: (Recurrent("LSTM"), {"x": torch.randn(3, 7, 16, generator=_g())}),
    "gru": lambda: (Recurrent("GRU"), {"x": torch.randn(3, 7, 16, generator=_g())}),
    "rnn": lambda: (Recurrent("RNN"), {"x": torch.randn(3, 7, 16, generator=_g())}),
    "transformer_encoder": lambda: (torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(
        32, 4, 64, batch_first=True, dropout=0.0), 2), {"src": torch.randn(2, 9, 32, generator=_g())}),
    "transformer": lambda: (torch.nn.Transformer(32, 4, 2, 2, 64, dropout=0.0, batch_first=True),
                            {"src": torch.randn(2, 9, 32, generator=_g()), "tgt": torch.randn(2, 5, 32, generator=_g())}),
}


def hf_types():
    """The transformers model types in the zoo (HF_TYPES below, probed)."""
    return HF_TYPES


def catalog():
    """{name: (source, builder)} for every architecture in the zoo."""
    out = {}
    for name, make in CLASSIC.items():
        out[f"classic/{name}"] = ("classic", make)
    for name, size in {**TORCHVISION, **TORCHVISION_OTHER}.items():
        out[f"torchvision/{name}"] = ("torchvision", tv_builder(name, size))
    for name in TIMM:
        out[f"timm/{name}"] = ("timm", timm_builder(name))
    for name in hf_types():
        out[f"transformers/{name}"] = ("transformers", hf_builder(name))
    return out


# From the probe (python -m zoo.catalog --probe, transformers 5.23.0: 191 of the 395 model types
# with a base model and no composite config): the base model builds from the shrunk config and
# runs on torch CPU in under 20 s with under 20 M parameters.
HF_TYPES = [
    'afmoe', 'aimv2_vision_model', 'albert', 'apertus', 'arcee', 'bart', 'beam', 'beit', 'bert',
    'bert-generation', 'big_bird', 'bigbird_pegasus', 'biogpt', 'bitnet', 'blenderbot', 'blenderbot-small',
    'bloom', 'camembert', 'canine', 'chinese_clip_vision_model', 'clip_text_model', 'clip_vision_model',
    'cohere', 'cohere2', 'convbert', 'cosmos3_edge_text', 'cpmant', 'ctrl', 'cvt', 'cwm', 'data2vec-audio',
    'data2vec-text', 'data2vec-vision', 'deberta', 'deberta-v2', 'deit', 'diffllama', 'dinov2',
    'dinov2_with_registers', 'dinov3_vit', 'distilbert', 'doge', 'dpr', 'electra', 'ernie', 'ernie4_5',
    'ernie4_5_moe', 'esmc', 'exaone4', 'exaone_moe', 'falcon_h1', 'falcon_mamba', 'fastspeech2_conformer',
    'flaubert', 'flint', 'fnet', 'focalnet', 'fsmt', 'gemma', 'gemma2', 'gemma3_text', 'glm4_moe',
    'glm4_moe_lite', 'glmasr_encoder', 'glpn', 'gpt-sw3', 'gpt2', 'gpt_bigcode', 'gpt_neo', 'gpt_neox',
    'gpt_neox_japanese', 'granite', 'granite_swa', 'gte', 'helium', 'hgnet_v2', 'hiera', 'hubert',
    'hyperclovax', 'ibert', 'ijepa', 'imagegpt', 'internlm3', 'internvl_vision', 'iquestcoder', 'jais2',
    'jetmoe', 'jina_embeddings_v3', 'laguna', 'layoutlm', 'led', 'levit', 'lfm2', 'llama', 'llama4_text',
    'longformer', 'longt5', 'm2m_100', 'mamba', 'markuplm', 'mbart', 'megatron-bert', 'mellum', 'ministral3',
    'mistral', 'mlcd', 'mlcd_vision_model', 'mobilebert', 'mobilenet_v1', 'mobilenet_v2', 'mobilevit',
    'mobilevitv2', 'molmo2_text', 'mpnet', 'mra', 'mt5', 'muse_glimmer_text', 'mvp', 'nanochat', 'nemotron_h',
    'nllb-moe', 'nomic_bert', 'nystromformer', 'olmo', 'olmo2', 'olmo3', 'openai-gpt', 'opt', 'pegasus',
    'pegasus_x', 'persimmon', 'phi', 'pixio', 'pixtral', 'plbart', 'poolformer', 'pvt', 'pvt_v2',
    'qianfan_ocr_vision', 'qwen2', 'qwen2_moe', 'qwen3', 'qwen3_moe', 'qwen3_vl_moe_text', 'qwen3_vl_text',
    'radio', 'regnet', 'rembert', 'roberta', 'roberta-prelayernorm', 'roc_bert', 'roformer', 'sam3_vit_model',
    'sam_hq_vision_model', 'sam_vision_model', 'seed_oss', 'segformer', 'sew', 'sew-d', 'siglip_vision_model',
    'splinter', 'stablelm', 'starcoder2', 'swiftformer', 'switch_transformers', 't5', 'tapas', 'textnet',
    'tipsv2_text_model', 'tipsv2_vision_model', 'ultrabert', 'umt5', 'unispeech', 'unispeech-sat',
    'vaultgemma', 'visual_bert', 'vit', 'vit_mae', 'vit_msn', 'vitdet', 'voxtral_realtime_encoder',
    'wav2vec2', 'wav2vec2-conformer', 'wavlm', 'xglm', 'xlm', 'xlm-roberta', 'xlm-roberta-xl', 'yolos',
    'yoso', 'zaya',
]


def _probe(names, limit_s=20):
    import signal
    import time
    import warnings

    warnings.filterwarnings("ignore")

    def alarm(*_):
        raise TimeoutError

    signal.signal(signal.SIGALRM, alarm)
    ok = []
    for name in names:
        signal.alarm(limit_s)
        t = time.time()
        try:
            torch.manual_seed(0)
            model, kw = hf_builder(name)()
            n = sum(p.numel() for p in model.parameters())
            with torch.no_grad():
                model.eval()(**kw)
            if n < 20_000_000:
                ok.append(name)
            print(f"ok {name} {n} {time.time() - t:.1f}s", flush=True)
        except BaseException as e:  # noqa: BLE001 - probing: every failure is reported
            print(f"no {name}: {type(e).__name__}: {str(e)[:100]}", flush=True)
        finally:
            signal.alarm(0)
    return ok


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--probe"]:
        from transformers import CONFIG_MAPPING, MODEL_MAPPING

        # Composite configs (a text and a vision config, ...) keep full-size sub-models: left out.
        types = sys.argv[2:] or [t for t in CONFIG_MAPPING.keys() if CONFIG_MAPPING[t] in MODEL_MAPPING
                                 and not getattr(CONFIG_MAPPING[t], "sub_configs", None)]
        print(sorted(_probe(types)))
