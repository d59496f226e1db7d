# Replace the line "@EXAMPLE@" with the file named by -v ex=..., doubling
# backslashes: scdoc reads them as escapes even in literal blocks.
/^@EXAMPLE@$/ {
	while ((getline l < ex) > 0) {
		gsub(/\\/, "&&", l)
		print l
	}
	next
}
{ print }
