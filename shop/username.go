package shop

import "unicode/utf8"

// Username rules: what a username may be. Accounts are created under them (services/auth) and
// the merchant's orders list filters by them (?username=); a name outside them names nobody.
const (
	UsernameMinLen = 3  // characters
	UsernameMaxLen = 32 // characters
)

// CheckUsername answers INVALID_INPUT unless name is a username this shop could hold: 3 to 32
// characters, each a letter, a digit, '_', '-' or '.'. Usernames are compared case-insensitively
// (migrations/004_username_case.sql).
func CheckUsername(name string) error {
	if n := utf8.RuneCountInString(name); n < UsernameMinLen || n > UsernameMaxLen {
		return Errorf(CodeInvalidInput, "username must be 3 to 32 characters")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return Errorf(CodeInvalidInput, "username may hold only letters, digits, '_', '-' and '.'")
		}
	}
	return nil
}
