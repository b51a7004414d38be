"""The tests' name for the local LLM server: it lives in agent/proposers/fake_llm_server.py, so a study
driver (agent/studies/llm_path.py) can replay replies through the real client code outside pytest too."""
from agent.proposers.fake_llm_server import FakeLLMServer, RecordedRequest, Scripted, refused_port

__all__ = ["FakeLLMServer", "RecordedRequest", "Scripted", "refused_port"]
