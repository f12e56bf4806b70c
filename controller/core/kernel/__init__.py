"""What two or more rules share, below every rule: owner lists and fault domains
(`candidates`), aggressiveness levels (`levels`) and how long a returned node waits
(`settling`), and the node marks a service's constraints need (`mark_needs`)."""
