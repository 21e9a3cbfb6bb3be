"""From what the user passed to text documents: inputs, archives, bundles, mapped files, presentation."""
